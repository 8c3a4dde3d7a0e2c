"""Kueue's visibility API (``visibility.kueue.x-k8s.io`` v1beta1 and v1beta2), served by the
controller behind the API server's aggregation layer (docs/visibility.md).

``api`` is the wire format (discovery documents, ``PendingWorkloadsSummary``, Status errors,
the paths and query parameters), ``pending`` the waiting workloads of a plan in queue order,
``source`` which plan a request is answered from, ``auth`` the front proxy's authentication
and the SubjectAccessReview authorization an aggregated server owes, ``certs`` the serving
certificate and the APIServices' ``caBundle``, ``server`` the HTTPS server that ties them.
"""
