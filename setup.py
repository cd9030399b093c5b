"""verl_asyncweb: fully asynchronous multi-step RL for vision-language web agents, as a verl plugin."""

from setuptools import find_packages, setup

# Ranges that admit both the CPU stack CI pins (constraints/cpu.txt) and verl[vllm]==0.9.1's GPU pins (torch 2.11.0,
# torchvision 0.26.0, transformers 5.9.0, vllm 0.24.0); tests/unit/test_packaging.py checks both against verl's
# metadata.
INSTALL_REQUIRES = [
    "verl==0.9.1",
    "torch>=2.11,<2.15",
    "torchvision>=0.26,<0.30",
    "transformers>=5.9,<5.11",
    "tokenizers>=0.22,<0.24",
    "tensordict>=0.8,!=0.9.0,<=0.10.0",
    "ray[default]>=2.41,<3",
    "playwright>=1.49,<2",
    "miniwob>=1.1,<2",
    "hydra-core>=1.3,<1.4",
    "omegaconf>=2.3,<2.4",
    "pillow>=11",
    "matplotlib>=3.9",
    "scipy>=1.11",
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
    license="Apache-2.0",
    packages=find_packages(include=["verl_asyncweb", "verl_asyncweb.*"]),
    package_data={
        "verl_asyncweb": [
            "config/**/*.yaml",
            "recipes/*.yaml",
            "env/sites/**/*",
            "backends/corpus/*.txt",
            "plan/profiles/*.yaml",
        ]
    },
    include_package_data=True,
    python_requires=">=3.10",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        # cupy-cu130: what verl's nccl checkpoint engine (weight sync to vLLM) imports; flash-attn as verl pins it.
        "gpu": ["verl[vllm,cupy-cu130,flash-attn-cu130torch211]==0.9.1"],
        "test": ["pytest==9.0.3", "pytest-asyncio==1.5.0", "pytest-timeout==2.4.0", "ruff==0.17.6"],
    },
    entry_points={"verl.plugins": ["asyncweb = verl_asyncweb.plugin"]},
)
