"""Builds the C hot paths of the Thrift translation (``gateway/thrift/_speedups.c``).

Everything else is declared in ``pyproject.toml``. The extension is not optional: a machine
without a C compiler fails the install loudly instead of silently running the slower
pure-Python code (which stays available with ``HMS_GATEWAY_PURE_PYTHON=1``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gateway.thrift._speedups",
            sources=["gateway/thrift/_speedups.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-missing-field-initializers"],
        )
    ]
)
