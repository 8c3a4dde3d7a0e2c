"""A real Kubernetes control plane (etcd, kube-apiserver, and kube-scheduler where placement
matters) for clueue's end-to-end tests.

- ``tests.testenv.build`` compiles the three binaries from the Go module proxy once per machine
  and caches them (``python -m tests.testenv.build`` does it ahead of time).
- ``tests.testenv.control_plane`` starts them on loopback ports with generated certificates,
  installs clueue's CRDs and tears everything down again.

Nothing here is a fake: the tests talk to the same kube-apiserver that a real cluster runs.
The submodules are deliberately not imported here, so that ``python -m tests.testenv.build``
does not import its own module twice.
"""
