"""The optional compiled modules; all other metadata is in pyproject.toml. Each is optional: without a
compiler (or, for the ACL signature, OpenSSL's headers) the install still succeeds and the Python
twin of each function runs instead (shoal.formats.compiled; docs/dependencies.md, "Build tools").

* shoal.protocol._acl_speedups: the ACL signature (protocol/_acl_speedups.c, docs/security.md "Cost").
* shoal.protocol._wire_speedups: the remoting JSON header reader and writer, the plain send's
  reader and answer (protocol/_wire_speedups.c).
* shoal.formats._record_speedups: the CommitLog record's encoder, dispatch reader and Java string
  hash (formats/_record_speedups.c, docs/performance.md).
* shoal.formats._batch_speedups: a batch body written as CommitLog records (formats/_batch_speedups.c;
  links zlib for the body CRC, so without zlib's headers only this one is missing).
* shoal.client._decode_speedups: the client's record decoder (client/_decode_speedups.c).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "shoal.protocol._acl_speedups",
            sources=["protocol/_acl_speedups.c"],
            libraries=["crypto"],
            optional=True,
        ),
        Extension(
            "shoal.protocol._wire_speedups",
            sources=["protocol/_wire_speedups.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
        Extension(
            "shoal.formats._batch_speedups",
            sources=["formats/_batch_speedups.c"],
            depends=["formats/_record_layout.h"],
            libraries=["z"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
        Extension(
            "shoal.formats._record_speedups",
            sources=["formats/_record_speedups.c"],
            depends=["formats/_record_layout.h"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
        Extension(
            "shoal.client._decode_speedups",
            sources=["client/_decode_speedups.c"],
            depends=["formats/_record_layout.h"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
    ]
)
