"""Build the compiled core ``rocketpy._speedups`` (Cython; see rocketpy/_accel.py). Metadata: pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [
            Extension(
                "rocketpy._speedups",
                ["rocketpy/_speedups.pyx"],
                include_dirs=["rocketpy"],
                depends=["rocketpy/crc32_fold.h"],
                libraries=["z"],
            )
        ],
        compiler_directives={"language_level": "3"},
    )
)
