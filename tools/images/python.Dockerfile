# The Python base the project's Dockerfiles start FROM (`python:3.11-slim`), built here without a
# container registry by tools/get_images.py: Debian's python3.11 in a venv at /usr/local, so the
# paths match the official image's (/usr/local/bin/python, /usr/local/lib/python3.11/site-packages).
# The build context holds this machine's extra CA certificates: pip inside later builds must trust
# what the host trusts (a proxy's CA, say), and pip reads the system store only when told to.
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
ENV LANG=C.UTF-8
COPY ca-certificates/ /usr/local/share/ca-certificates/
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv python3-dev \
 && update-ca-certificates \
 && python3 -m venv /usr/local \
 && printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > /etc/pip.conf \
 && rm -rf /var/lib/apt/lists/*
CMD ["python3"]
