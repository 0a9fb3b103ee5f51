"""What the route modules share above the app's extensions: who may call a route
(``auth``), the administrators' audit (``audit``) and how a workload's events are served
(``events``)."""
