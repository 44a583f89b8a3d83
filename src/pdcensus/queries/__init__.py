"""Query generation: the census quantities as PromQL, recording rules and a Grafana dashboard.

It lives apart from :mod:`pdcensus.report`, which renders a census report that was already
computed; this package writes the queries a user (``pdcensus promql``, ``pdcensus grafana``)
or the fleet's screen (:mod:`pdcensus.fleet.screen_queries`) sends to Prometheus. It reads
only the engine profiles' sample names (:mod:`pdcensus.series.profiles`).
"""
