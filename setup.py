"""Build the compiled core: one Cython module per package that owns hot loops (see rocketpy/_accel.py).

Each ``_speedups.pyx`` cimports the shared C helpers of ``rocketpy/_cshared.pxd`` (which include
``rocketpy/crc32_fold.h`` and call zlib). Metadata: pyproject.toml.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

#: Import name of each compiled module; its source is the matching ``.pyx`` (rocketpy/_accel.py loads
#: them in this order).
MODULES = [
    "rocketpy._speedups",
    "rocketpy.remoting._speedups",
    "rocketpy.protocol._speedups",
    "rocketpy.protocol.headers._speedups",
    "rocketpy.acl._speedups",
    "rocketpy.broker.store._speedups",
    "rocketpy.broker.store._storepath",
    "rocketpy.broker.processors._speedups",
    "rocketpy.client._speedups",
    "rocketpy.broker.pop._speedups",
    "rocketpy.broker.processors._sendrun",
    "rocketpy.remoting._turn",
    "rocketpy.broker.store._indexkeys",
    "rocketpy.broker.pop._plain",
    "rocketpy.client._traceenc",
    "rocketpy.broker.processors._pullpath",
    "rocketpy.broker.processors._poppath",
]

setup(
    ext_modules=cythonize(
        [
            Extension(
                name,
                [name.replace(".", "/") + ".pyx"],
                include_dirs=["rocketpy"],
                depends=[
                    "rocketpy/crc32_fold.h",
                    "rocketpy/_cshared.pxd",
                    "broker/processors/_brokermsg.pxd",
                    "broker/processors/_fastpath.pxd",
                ],
                libraries=["z"],
            )
            for name in MODULES
        ],
        compiler_directives={"language_level": "3"},
    )
)
