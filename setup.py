"""Installs convs2s_tf (the library) and pipelines (its command-line entry points)."""

from setuptools import find_packages, setup

# Pinned to the versions this project is tested with: TensorFlow, tensorflow-text and
# tensorflow-serving-api must share a minor version or tf-text's ops fail to load.
INSTALL_REQUIRES = [
    "tensorflow==2.21.*",
    "tensorflow-text==2.21.*",
    "keras>=3.10,<4",
    "tensorflow-datasets>=4.9,<5",
    "tensorboard==2.21.*",
    "tensorflow-serving-api==2.21.*",
    "grpcio>=1.60,<2",
    # pipelines.serve's standard gRPC health service.
    "grpcio-health-checking>=1.60,<2",
    # pipelines.serve's REST API and translation page.
    "tornado>=6.4,<7",
    "sentencepiece>=0.2,<0.3",
    "sacrebleu>=2.4,<3",
    "absl-py>=2.1,<3",
    # tfds builders import it at run time; it is not a declared tfds dependency.
    "importlib_resources>=6",
    # Attention heatmaps for TensorBoard and pipelines.translate --attention_dir.
    "matplotlib>=3.8,<4",
    "numpy>=1.26,<3",
]

EXTRAS_REQUIRE = {
    "test": [
        "pytest>=8,<10",
        # scripts/run_tests.sh runs the suite in two processes (`-n`, `--dist loadfile`).
        "pytest-xdist>=3.5,<4",
        "flake8>=7,<8",
        "black>=24",
        "isort>=5.13",
        # The type checker of scripts/run_tests.sh (configured in pyproject.toml), and the
        # stubs of the one dependency that ships its types separately.
        "mypy>=2.4,<3",
        "types-grpcio",
        # The library's layering (`lint-imports`, contracts in pyproject.toml).
        "import-linter>=2.1,<3",
        # benchmarks.data_scale samples the memory of a process tree (tested in the suite).
        "psutil>=5.9",
        # The translation page's test drives Debian's Chromium through its ChromeDriver.
        "selenium>=4.20,<5",
    ],
    # pipelines.import_fairseq reads fairseq checkpoints with PyTorch (torch.load with
    # weights_only=True and safe_globals). Install the CPU build first where pip would
    # otherwise pull a CUDA one: `pip install torch==2.13.0` on these machines.
    "fairseq_import": ["torch>=2.5"],
    # Parity tests against fairseq itself (tests/test_fairseq_import.py). Install
    # torch==2.13.0 (the CPU build) first, as its own pip command, then this extra with
    # --no-build-isolation: fairseq-fixed (the 0.12 line that installs on Python 3.11)
    # compiles extensions against the installed torch and needs Cython to build.
    "parity": ["torch==2.13.0", "fairseq-fixed>=0.12.3,<0.13"],
    # benchmarks.compare.ctranslate2: a fairseq Transformer served by CTranslate2 (install
    # as the parity extra: torch first, then this with --no-build-isolation).
    "benchmark": ["torch==2.13.0", "fairseq-fixed>=0.12.3,<0.13", "ctranslate2>=4.8,<5"],
}

setup(
    name="convs2s_tf",
    version="0.1.0",
    description="Convolutional Sequence to Sequence translation (Gehring et al. 2017) "
    "in TensorFlow/Keras: training, evaluation and TF Serving export.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.13",
    packages=find_packages(include=["convs2s_tf", "convs2s_tf.*", "pipelines", "pipelines.*"]),
    include_package_data=True,
    package_data={
        "convs2s_tf": [
            "datasets/multi30k/raw/*.gz",
            "datasets/multi30k/*.md",
            "datasets/multi30k/*.bib",
            "serving/web/*.html",
        ]
    },
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    license="Apache-2.0",
)
