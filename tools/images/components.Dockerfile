# One image for every Kubernetes component a kind node runs in containers (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd, kube-proxy, CoreDNS and the pod network's
# DaemonSet), built by tools/get_images.py from binaries it built from Go modules. It is tagged with
# each name `kubeadm config images list` prints: the layers are stored once, in the node image too.
# kubeadm's static pods and kube-proxy's DaemonSet name the program to run; CoreDNS's image gets
# its entrypoint from a small image on top (tools/get_images.py).
ARG DEBIAN_IMAGE
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates conntrack iproute2 ipset iptables nftables kmod \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY bin/ /usr/local/bin/
RUN cd /usr/local/bin \
 && for program in kube-apiserver kube-controller-manager kube-scheduler etcd; do ln -s shoal-k8s "$program"; done \
 && for program in kube-proxy kubectl; do ln -s shoal-node "$program"; done \
 && ln -s /usr/local/bin/coredns /coredns
