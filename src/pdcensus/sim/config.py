"""The simulated engine's flags: one table, parsed and validated the way radiance's ``config_parse`` does.

The flag table (:data:`FLAGS`) is the single source for three things: the parser here, the
``core/config.cpp``-shaped source written by :mod:`pdcensus.sim.config_source`, and the argv
written to ``cmdline``. Unknown flags and unknown enum values are refused at start with a
:class:`~pdcensus.errors.UsageError` whose message lists the members, e.g.
``unknown value 'keepall' for --checkpoint-policy: expected one of: geometric-backoff, tip-only, keep-all``.

``--build`` is the simulator's build selector, not an engine flag: it never reaches argv.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from pdcensus.errors import UsageError


class Build(str, Enum):
    """The radiance builds the simulator can be (they differ in metric set and knob support)."""

    V1_8_3 = "1.8.3"
    V1_0_13 = "1.0.13"

    @property
    def has_ledger(self) -> bool:
        """1.8.x exports the decode/held step counters; 1.0.13 does not."""
        return self is Build.V1_8_3

    @property
    def honours_interleave(self) -> bool:
        """1.0.13 parses ``--prefill-interleave`` but holds nothing."""
        return self is Build.V1_8_3


class CheckpointPolicy(str, Enum):
    """Retention of linear-state checkpoints (writes happen at every interval whatever the policy)."""

    GEOMETRIC_BACKOFF = "geometric-backoff"
    TIP_ONLY = "tip-only"
    KEEP_ALL = "keep-all"


class FlagKind(str, Enum):
    """How a flag's argument is parsed."""

    INT = "int"
    AUTO_OR_INT = "auto|int"
    ENUM = "enum"
    STRING = "string"


@dataclass(frozen=True)
class FlagSpec:
    """One row of the help table: flag, argument, help text, kind, enum members, minimum."""

    flag: str
    argument: str
    help: str
    kind: FlagKind
    default: str
    members: tuple[str, ...] = ()
    minimum: int = 0


FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec("--model", "NAME", "served model name (the model_name label)", FlagKind.STRING,
             "radiance/hybrid-moe-a3b"),
    FlagSpec("--port", "N", "HTTP port for the API, /metrics, /stats and /diagnostics", FlagKind.INT,
             "7770", minimum=1),
    FlagSpec("--max-num-seqs", "N", "most sequences in the running batch", FlagKind.INT, "64", minimum=1),
    FlagSpec("--max-num-batched-tokens", "N",
             "token budget of one step; sizes the prefill arena the expert slab lends", FlagKind.INT,
             "4096", minimum=64),
    FlagSpec("--max-model-len", "N", "longest context a sequence may reach", FlagKind.INT, "131072",
             minimum=256),
    FlagSpec("--block-size", "N", "tokens per KV block", FlagKind.INT, "16", minimum=1),
    FlagSpec("--num-gpu-blocks-override", "N", "KV cache capacity in blocks (0 = from the VRAM split)",
             FlagKind.INT, "0"),
    FlagSpec("--prefill-interleave", "N",
             "decode-only steps held after every chunk step taken beside decoders (0 = off)",
             FlagKind.INT, "0"),
    FlagSpec("--busy-prefill-chunk", "auto|N",
             "prefill chunk while decoders run; auto reserves 1+spec rows per decoder and 1/8 of the "
             "budget per waiting request", FlagKind.AUTO_OR_INT, "auto", minimum=1),
    FlagSpec("--prefill-span", "N",
             "checkpoint intervals a lone prefill may take in one step; needs "
             "--max-num-batched-tokens = N x --checkpoint-interval", FlagKind.INT, "1", minimum=1),
    FlagSpec("--checkpoint-interval", "N", "tokens between linear-state snapshots during prefill",
             FlagKind.INT, "4096", minimum=64),
    FlagSpec("--checkpoint-policy", "POLICY", "which written checkpoints are retained", FlagKind.ENUM,
             "geometric-backoff", members=tuple(p.value for p in CheckpointPolicy)),
    FlagSpec("--checkpoint-slots", "auto|N",
             "total retained checkpoints; auto = policy held() + 1 per --max-num-seqs, within an eighth "
             "of host RAM", FlagKind.AUTO_OR_INT, "auto", minimum=1),
    FlagSpec("--speculative-tokens", "N", "draft tokens per decode row (rows per sequence = 1 + N)",
             FlagKind.INT, "0"),
)

BUILD_FLAG = "--build"
FLAG_SPECS: dict[str, FlagSpec] = {spec.flag: spec for spec in FLAGS}


@dataclass(frozen=True)
class EngineConfig:
    """The parsed flags of one engine process (plus the build it runs)."""

    build: Build = Build.V1_8_3
    model: str = "radiance/hybrid-moe-a3b"
    port: int = 7770
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 4096
    max_model_len: int = 131072
    block_size: int = 16
    num_gpu_blocks_override: int = 0
    prefill_interleave: int = 0
    busy_prefill_chunk: int | None = None  # None = auto
    prefill_span: int = 1
    checkpoint_interval: int = 4096
    checkpoint_policy: CheckpointPolicy = CheckpointPolicy.GEOMETRIC_BACKOFF
    checkpoint_slots: int | None = None  # None = auto
    speculative_tokens: int = 0
    argv_flags: tuple[tuple[str, str], ...] = ()  # flags as given, in order (what reaches argv)

    @property
    def rows_per_sequence(self) -> int:
        return 1 + self.speculative_tokens

    @property
    def held_steps_per_chunk(self) -> int:
        """Held decode-only steps after a chunk step beside decoders (0 where the build ignores it)."""
        return self.prefill_interleave if self.build.honours_interleave else 0

    def flags(self) -> dict[str, str]:
        """Every engine flag with its effective value (strings, as on a command line)."""
        out: dict[str, str] = {}
        for spec in FLAGS:
            attr = spec.flag[2:].replace("-", "_")
            value = getattr(self, attr)
            if isinstance(value, Enum):
                out[spec.flag] = str(value.value)
            elif value is None:
                out[spec.flag] = "auto"
            else:
                out[spec.flag] = str(value)
        return out

    def argv(self, program: str = "radiance") -> list[str]:
        """The process argv: program, ``serve``, then the flags as given (like /proc/PID/cmdline)."""
        args = [program, "serve"]
        for flag, value in self.argv_flags:
            args += [flag, value]
        return args


def _members_text(members: tuple[str, ...]) -> str:
    return ", ".join(members)


def _parse_int(spec: FlagSpec, raw: str) -> int:
    try:
        value = int(raw, 10)
    except ValueError:
        raise UsageError(f"bad value {raw!r} for {spec.flag}: expected {spec.argument}") from None
    if value < spec.minimum:
        raise UsageError(f"bad value {raw!r} for {spec.flag}: must be >= {spec.minimum}")
    return value


def _parse_value(spec: FlagSpec, raw: str) -> object:
    if spec.kind is FlagKind.INT:
        return _parse_int(spec, raw)
    if spec.kind is FlagKind.AUTO_OR_INT:
        if raw == "auto":
            return None
        if not raw.isdigit():
            raise UsageError(f"unknown value {raw!r} for {spec.flag}: expected one of: auto, a positive integer")
        return _parse_int(spec, raw)
    if spec.kind is FlagKind.ENUM:
        if raw not in spec.members:
            raise UsageError(
                f"unknown value {raw!r} for {spec.flag}: expected one of: {_members_text(spec.members)}"
            )
        return CheckpointPolicy(raw)
    return raw


def normalize_flag(flag: str) -> str:
    """'checkpoint_policy' / 'checkpoint-policy' / '--checkpoint-policy' -> '--checkpoint-policy'."""
    name = flag.strip()
    if not name.startswith("--"):
        name = "--" + name.lstrip("-")
    return name.replace("_", "-")


def parse_config(flags: Mapping[str, str], base: EngineConfig | None = None) -> EngineConfig:
    """Apply ``{'--flag': 'value'}`` over ``base``; refuse unknown flags/values; check combinations."""
    config = base or EngineConfig()
    argv = dict(config.argv_flags)
    changes: dict[str, object] = {}
    for raw_flag, raw_value in flags.items():
        flag = normalize_flag(raw_flag)
        value = str(raw_value).strip()
        if flag == BUILD_FLAG:
            members = tuple(b.value for b in Build)
            if value not in members:
                raise UsageError(f"unknown value {value!r} for --build: expected one of: {_members_text(members)}")
            changes["build"] = Build(value)
            continue
        spec = FLAG_SPECS.get(flag)
        if spec is None:
            known = _members_text(tuple(FLAG_SPECS) + (BUILD_FLAG,))
            raise UsageError(f"unknown flag {raw_flag!r}: expected one of: {known}")
        changes[flag[2:].replace("-", "_")] = _parse_value(spec, value)
        argv[flag] = value
    order = [s.flag for s in FLAGS]
    argv_flags = tuple(sorted(argv.items(), key=lambda kv: order.index(kv[0])))
    # each value was parsed to its field's type by _parse_value; a dict of mixed fields is typed as object
    config = replace(config, argv_flags=argv_flags, **changes)  # type: ignore[arg-type]
    validate_config(config)
    return config


def validate_config(config: EngineConfig) -> None:
    """The cross-flag checks radiance makes at start."""
    if config.prefill_span > 1:
        want = config.prefill_span * config.checkpoint_interval
        if config.max_num_batched_tokens != want:
            raise UsageError(
                f"--prefill-span {config.prefill_span} needs --max-num-batched-tokens = "
                f"{config.prefill_span} x --checkpoint-interval = {want}, got {config.max_num_batched_tokens}"
            )
    if config.checkpoint_interval > config.max_model_len:
        raise UsageError(
            f"--checkpoint-interval {config.checkpoint_interval} exceeds --max-model-len {config.max_model_len}"
        )
