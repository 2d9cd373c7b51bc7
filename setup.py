"""The optional compiled ACL signature (protocol/_acl_speedups.c, docs/security.md "Cost"); all other
metadata is in pyproject.toml. Optional: without a compiler or OpenSSL's headers the install still
succeeds, and shoal.protocol.acl_signature computes the same signature in Python."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "shoal.protocol._acl_speedups",
            sources=["protocol/_acl_speedups.c"],
            libraries=["crypto"],
            optional=True,
        )
    ]
)
