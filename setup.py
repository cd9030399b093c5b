"""verl_asyncweb: fully asynchronous multi-step RL for vision-language web agents, as a verl plugin."""

from setuptools import find_packages, setup

# Versions known to work together on CPU (CI) and as the base of a GPU deployment.
INSTALL_REQUIRES = [
    "verl==0.9.1",
    "torch==2.14.1",
    "torchvision==0.29.1",
    "transformers==5.10.4",
    "tokenizers==0.22.2",
    "tensordict==0.10.0",
    "ray[default]==2.60.0",
    "playwright==1.65.2",
    "miniwob==1.1.0",
    "hydra-core==1.3.8",
    "omegaconf==2.3.0",
    "pillow>=11",
    "matplotlib>=3.9",
    "aiohttp>=3.10",
    "tqdm>=4.66",
    "TransferQueue>=0.1.10",
    "pyzmq",
    "msgspec",
    "qwen_vl_utils",
    "fastapi",
    "uvicorn",
    "cachetools",
]

setup(
    name="verl_asyncweb",
    version="0.1.0",
    description=__doc__,
    packages=find_packages(include=["verl_asyncweb", "verl_asyncweb.*"]),
    package_data={"verl_asyncweb": ["config/*.yaml", "recipes/*.yaml", "env/sites/**/*", "backends/corpus/*.txt"]},
    include_package_data=True,
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "gpu": ["verl[vllm]==0.9.1", "flash-attn"],
        "test": ["pytest==9.0.3", "pytest-asyncio==1.5.0", "pytest-timeout==2.4.0", "ruff==0.17.6"],
    },
    entry_points={"verl.plugins": ["asyncweb = verl_asyncweb.plugin"]},
)
