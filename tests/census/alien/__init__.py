"""Alien recordings: a second engine model, written apart from ``pdcensus.sim``, with ground truth.

The census is tuned on recordings of our own simulator; a real endpoint is some other
engine, with other step times, chunk sizes, scrape intervals and metric sets. This package
makes such recordings so that the census can be judged on data it was not shaped on:

- :mod:`.engine` — a fixed-tick engine with a fluid batch and its own step-time law
  (decode-only = a + b x batch + c x context; chunk = d + e x chunk tokens, with or without
  decode rows), and four causes made by their mechanisms: long prompts beside decoders
  (step-time sharing), decode steps inflated for 3-12 min after a large prefill (eviction),
  preemption bursts whose sequences wait for KV and re-prefill from token 0 (preemption
  stall), short prompts only (healthy), and an idle endpoint. It accounts each decoder's
  decode time and what it lost to each cause: that is the ground truth.
- :mod:`.export` — scrapes the engine under radiance 1.8, radiance 1.0.13, plain vLLM (V1 or
  V0 names) or a 1.0.13 -> 1.8 upgrade, every 10-30 s with jitter, missed scrapes, a restart
  and optionally ``process_start_time_seconds``; written with the shared ``RecordingBuilder``.
- :mod:`.generator` — random configurations and the truth rule (5 % of decoders' time and
  25 % of all lost time, the census's own), with a ``borderline`` flag near the thresholds.

::

    from census.alien.generator import random_config, make_recording
    recording, truth = make_recording(random_config(seed=7))

``bench/census_alien.py`` runs the census over many of them; ``tests/census/test_alien.py``
asserts that it is never confidently wrong on them.
"""
