"""The simulated box: VRAM split, host RAM, cards, links and clocks, and the prefill stager.

These are the facts ``boot.log`` and ``/diagnostics`` report and that no metric carries. The
KV capacity follows from the VRAM split unless ``--num-gpu-blocks-override`` is given; the
checkpoint slots' ``auto`` is bounded by an eighth of host RAM.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class Card:
    """One accelerator and the chain of links between it and host memory."""

    index: int
    name: str = "H200-141GB"
    link_chain: tuple[str, ...] = ("cpu0", "pcie-switch0", "gpu")
    link_generation: int = 5
    link_width: int = 16
    link_width_expected: int = 16
    sm_clock_mhz: int = 1980
    sm_clock_max_mhz: int = 1980
    memory_clock_mhz: int = 3201


@dataclass(frozen=True)
class Hardware:
    """The box one engine process runs on."""

    vram_bytes: int = 141 * GIB
    weights_bytes: int = 58 * GIB
    expert_slab_bytes: int = 40 * GIB
    activation_bytes: int = 9 * GIB
    kv_bytes_per_token: int = 98_304  # paged-KV layers only; the linear layers keep a fixed state
    host_ram_bytes: int = 1024 * GIB
    checkpoint_bytes: int = 96 * MIB
    stager_min_pass_tokens: int = 256
    cards: tuple[Card, ...] = field(default_factory=lambda: (Card(0),))

    @property
    def kv_bytes(self) -> int:
        return self.vram_bytes - self.weights_bytes - self.expert_slab_bytes - self.activation_bytes

    def kv_blocks(self, block_size: int, override: int = 0) -> int:
        """KV capacity in blocks: the override, else what the VRAM split leaves."""
        if override > 0:
            return override
        return self.kv_bytes // (self.kv_bytes_per_token * block_size)

    def vram_split(self) -> dict[str, int]:
        return {
            "total_bytes": self.vram_bytes,
            "weights_bytes": self.weights_bytes,
            "expert_slab_bytes": self.expert_slab_bytes,
            "activation_bytes": self.activation_bytes,
            "kv_cache_bytes": self.kv_bytes,
        }
