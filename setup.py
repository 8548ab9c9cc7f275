"""The optional C accelerator: without a compiler, rngtrace installs and runs in pure Python."""

from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError

# src/rngtrace/_speedups/: one C file per Python module the accelerator mirrors (module.c lists
# them) and speedups.h, the header they share. They build one module, rngtrace/_speedups.*.so.
SPEEDUPS = "src/rngtrace/_speedups"

# A draw's fast path runs through recorder.c, record.c, locks.c, inplace.c and stack.c: linked
# with LTO, the compiler inlines across those files as it did when they were one (without, each
# draw costs some 2% more). A compiler or linker that cannot do LTO builds without it.
LTO = ["-flto=auto"]


class BuildExt(build_ext):
    def build_extension(self, ext):
        if self.compiler.compiler_type == "unix":
            plain = list(ext.extra_compile_args), list(ext.extra_link_args)
            ext.extra_compile_args, ext.extra_link_args = plain[0] + LTO, plain[1] + LTO
            try:
                return super().build_extension(ext)
            except CCompilerError as error:
                self.warn(f"building {ext.name} without LTO ({error})")
                ext.extra_compile_args, ext.extra_link_args = plain
        return super().build_extension(ext)


setup(
    ext_modules=[
        Extension(
            "rngtrace._speedups",
            sorted(glob(f"{SPEEDUPS}/*.c")),
            include_dirs=[SPEEDUPS],
            depends=sorted(glob(f"{SPEEDUPS}/*.h")),
            optional=True,
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
