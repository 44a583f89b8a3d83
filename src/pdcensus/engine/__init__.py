"""A real engine on this machine: llama.cpp's server on the CPU, driven and measured end to end.

``locate`` finds the ``llama-server`` binary and the GGUF model that the ``engine`` extra
installs; ``llama_server`` starts and stops one server on 127.0.0.1; ``streams`` is the client
load with per-token timestamps; ``truth`` turns the client records into the truth a census is
checked against; ``experiment`` runs the whole thing with a real Prometheus scraping it.
"""
