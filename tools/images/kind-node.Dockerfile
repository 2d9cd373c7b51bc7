# A kind node image built here without a container registry (tools/get_images.py): kind's own base
# recipe (the files of its images/base, from the kind Go module) on a debootstrapped Debian, with
# Debian's containerd, runc and CNI plugins in place of the ones kind builds from git; kubelet,
# kubeadm and kubectl from tools/k8s-node; the component images in /kind/images, imported into
# containerd at boot before kubelet starts. See docs/images.md.
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
ENV container=docker
# Packages first: kind's files below replace their default configs (containerd's, say). policy-rc.d
# keeps the packages' scripts from starting services during the build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      systemd conntrack iptables nftables iproute2 ethtool util-linux mount kmod libseccomp2 pigz \
      fuse-overlayfs e2fsprogs bash ca-certificates curl jq procps \
      containerd runc containernetworking-plugins \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /usr/sbin/policy-rc.d
COPY kind-base/ /
RUN chmod 0755 /usr/local/bin/* /kind /kind/bin /kind/bin/* \
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
 && ln -sf /usr/lib/systemd/systemd /sbin/init \
 && ln -s /usr/bin/containerd /usr/local/bin/containerd \
 && mkdir -p /opt/cni /etc/kubernetes/manifests && ln -s /usr/lib/cni /opt/cni/bin \
 && ctr oci spec \
      | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
      | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json
COPY node/ /
RUN chmod 0755 /usr/local/bin/shoal-node \
 && for program in kubelet kubeadm kubectl; do ln -s /usr/local/bin/shoal-node "/usr/bin/$program"; done \
 && sed -i -e 's/^\(\s*restrict_oom_score_adj\s*=\s*\).*/\1true/' \
      -e "s|^\(\s*sandbox_image\s*=\s*\).*|\1\"$(cat /kind/pause-image)\"|" /etc/containerd/config.toml \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service shoal-preload-images.service \
 && systemctl mask systemd-binfmt.service
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
