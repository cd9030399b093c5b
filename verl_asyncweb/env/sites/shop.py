"""Bundled site "Korvo Shop": categories, product pages, cart and checkout (state: cart, orders)."""

from __future__ import annotations

from aiohttp import web

from verl_asyncweb.env.sites.common import e, page, radios, redirect, state

SITE = "Korvo Shop"
PRODUCTS = {
    "p1": {"name": "Lumen X2", "category": "Lamps", "price": 49, "sku": "LX2-118", "maker": "Korvath Instruments"},
    "p2": {"name": "Lumen Mini", "category": "Lamps", "price": 29, "sku": "LMN-204", "maker": "Korvath Instruments"},
    "p3": {"name": "Arc Desk Lamp", "category": "Lamps", "price": 64, "sku": "ADL-330", "maker": "Brightwell"},
    "p4": {"name": "Trail Kettle", "category": "Kitchen", "price": 35, "sku": "TKT-512", "maker": "Hollis & Vane"},
    "p5": {"name": "Stone Mortar", "category": "Kitchen", "price": 22, "sku": "STM-078", "maker": "Hollis & Vane"},
    "p6": {"name": "Copper Pan", "category": "Kitchen", "price": 58, "sku": "CPN-640", "maker": "Marenport Forge"},
    "p7": {"name": "Field Notebook", "category": "Paper", "price": 9, "sku": "FNB-101", "maker": "Tessin Mills"},
    "p8": {"name": "Ledger Pad", "category": "Paper", "price": 14, "sku": "LGP-220", "maker": "Tessin Mills"},
}
CATEGORIES = ["Lamps", "Kitchen", "Paper"]
SHIPPING = ["Standard", "Express"]
NAV = [("Home", "/shop/"), ("Cart", "/shop/cart")]


def _cart(request: web.Request) -> dict[str, int]:
    return state(request).setdefault("cart", {})


async def home(request: web.Request) -> web.Response:
    cats = "".join(f'<li><a href="/shop/c/{c}">{c}</a></li>' for c in CATEGORIES)
    body = (
        "<h1>Welcome to Korvo Shop</h1><h2>Categories</h2>"
        f"<ul class='links'>{cats}</ul>"
        "<form action='/shop/search' method='get'><input type='text' name='q' placeholder='Search products'>"
        "<button>Search</button></form>"
    )
    return page(SITE, "Home", body, NAV)


def _product_rows(ids: list[str]) -> str:
    rows = "".join(
        f'<tr><td><a href="/shop/p/{pid}">{e(PRODUCTS[pid]["name"])}</a></td><td>${PRODUCTS[pid]["price"]}</td></tr>'
        for pid in ids
    )
    return f"<table><tr><th>Product</th><th>Price</th></tr>{rows}</table>"


async def category(request: web.Request) -> web.Response:
    cat = request.match_info["cat"]
    if cat not in CATEGORIES:
        raise web.HTTPNotFound()
    ids = [pid for pid, p in PRODUCTS.items() if p["category"] == cat]
    return page(SITE, cat, f"<h1>{e(cat)}</h1>{_product_rows(ids)}", NAV)


async def search(request: web.Request) -> web.Response:
    query = request.query.get("q", "").strip().lower()
    ids = [pid for pid, p in PRODUCTS.items() if query and query in (p["name"] + " " + p["maker"]).lower()]
    found = _product_rows(ids) if ids else "<p class='note'>No products found.</p>"
    return page(SITE, "Search", f"<h1>Results for {e(query)}</h1>{found}", NAV)


async def product(request: web.Request) -> web.Response:
    pid = request.match_info["pid"]
    if pid not in PRODUCTS:
        raise web.HTTPNotFound()
    p = PRODUCTS[pid]
    body = (
        f"<h1>{e(p['name'])}</h1><dl><dt>Price</dt><dd>${p['price']}</dd><dt>SKU</dt><dd>{e(p['sku'])}</dd>"
        f"<dt>Maker</dt><dd>{e(p['maker'])}</dd><dt>Category</dt><dd>{e(p['category'])}</dd></dl>"
        f"<form method='post' action='/shop/cart/add'><input type='hidden' name='pid' value='{pid}'>"
        "<label>Quantity <input type='number' name='qty' value='1' min='1' max='20'></label><br>"
        "<button>Add to cart</button></form>"
    )
    return page(SITE, p["name"], body, NAV)


async def cart_add(request: web.Request) -> web.Response:
    form = await request.post()
    pid = str(form.get("pid", ""))
    try:
        qty = max(1, min(20, int(str(form.get("qty", "1")))))
    except ValueError:
        qty = 1
    if pid in PRODUCTS:
        cart = _cart(request)
        cart[pid] = cart.get(pid, 0) + qty
    raise redirect("/shop/cart")


async def cart_remove(request: web.Request) -> web.Response:
    form = await request.post()
    _cart(request).pop(str(form.get("pid", "")), None)
    raise redirect("/shop/cart")


async def cart(request: web.Request) -> web.Response:
    items = _cart(request)
    if not items:
        return page(SITE, "Cart", "<h1>Your cart</h1><p class='note'>Your cart is empty.</p>", NAV)
    rows = "".join(
        f"<tr><td>{e(PRODUCTS[pid]['name'])}</td><td>{qty}</td><td>"
        f"<form method='post' action='/shop/cart/remove'><input type='hidden' name='pid' value='{pid}'>"
        f"<button>Remove {e(PRODUCTS[pid]['name'])}</button></form></td></tr>"
        for pid, qty in items.items()
    )
    total = sum(PRODUCTS[pid]["price"] * qty for pid, qty in items.items())
    body = (
        f"<h1>Your cart</h1><table><tr><th>Product</th><th>Qty</th><th></th></tr>{rows}</table>"
        f"<p>Total: ${total}</p><a href='/shop/checkout'>Checkout</a>"
    )
    return page(SITE, "Cart", body, NAV)


async def checkout(request: web.Request) -> web.Response:
    body = (
        "<h1>Checkout</h1><form class='stack' method='post' action='/shop/order'>"
        "<label class='field'>Full name <input type='text' name='name'></label>"
        "<label class='field'>Address <input type='text' name='address'></label>"
        f"<p>Shipping: {radios('shipping', SHIPPING, 'Standard')}</p><button>Place order</button></form>"
    )
    return page(SITE, "Checkout", body, NAV)


async def place_order(request: web.Request) -> web.Response:
    form = await request.post()
    items = _cart(request)
    if not items:
        raise redirect("/shop/cart")
    orders = state(request).setdefault("orders", [])
    orders.append(
        {
            "items": dict(items),
            "name": str(form.get("name", "")).strip(),
            "address": str(form.get("address", "")).strip(),
            "shipping": str(form.get("shipping", "")),
        }
    )
    items.clear()
    raise redirect(f"/shop/order/{len(orders)}")


async def order(request: web.Request) -> web.Response:
    number = request.match_info["n"]
    return page(SITE, "Order", f"<h1>Order #{e(number)} confirmed</h1><p>Thank you for shopping.</p>", NAV)


def register(app: web.Application) -> None:
    """Add the shop's routes."""
    app.router.add_get("/shop/", home)
    app.router.add_get("/shop/c/{cat}", category)
    app.router.add_get("/shop/search", search)
    app.router.add_get("/shop/p/{pid}", product)
    app.router.add_post("/shop/cart/add", cart_add)
    app.router.add_post("/shop/cart/remove", cart_remove)
    app.router.add_get("/shop/cart", cart)
    app.router.add_get("/shop/checkout", checkout)
    app.router.add_post("/shop/order", place_order)
    app.router.add_get("/shop/order/{n}", order)
