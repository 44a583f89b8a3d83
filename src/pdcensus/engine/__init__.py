"""Real engines on this machine, driven and measured end to end: llama.cpp's server and vLLM on the CPU.

llama.cpp: ``locate`` finds the ``llama-server`` binary and the GGUF model that the ``engine``
extra installs; ``llama_server`` starts and stops one server on 127.0.0.1; ``streams`` is the
client load with per-token timestamps; ``truth`` turns the client records into the truth a census
is checked against; ``experiment`` runs the whole thing with a real Prometheus scraping it.

vLLM: ``vllm_server`` finds a python with vLLM and serves a dummy Llama (no weights, token-id
prompts); ``vllm_load`` is its client load (the same records as ``streams``); ``stalls`` measures
the seconds-long gaps a preempted request leaves; ``vllm_experiment`` runs a scenario with a real
Prometheus, census and truth, keeping every file.
"""
