"""The dashboard: a small read-only web app over a snapshot's plan and the decision log
(docs/dashboard.md). ``views`` turns a snapshot and its plan into what the pages show, ``svg``
draws the pictures, ``server`` serves the pages; ``clueue dashboard`` and ``clueue controller
--dashboard-bind-address`` start it."""
