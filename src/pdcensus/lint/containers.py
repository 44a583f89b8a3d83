"""``podman run``/``docker run``/``nerdctl run``: the argv a container command hands its image.

A serve script often starts the engine in a container: ``docker run --gpus all -e X=1
vllm/vllm-openai:v0.32.0 --model m ...``. The run options are skipped (those in
:data:`pdcensus.lint.shell.RUN_VALUE_OPTIONS` take a value), ``-e NAME=value`` are env lines,
``--entrypoint`` replaces the image's program, and what follows the image is the argv its
entrypoint gets: the engine's argv for radiance's image, vLLM's for a vLLM image
(``vllm/vllm-openai``, whose entrypoint is ``vllm serve``), else a command of its own.
"""

from __future__ import annotations

from dataclasses import replace

from pdcensus.engines.radiance import CLI as RADIANCE_CLI
from pdcensus.engines.vllm import CLI as VLLM_CLI
from pdcensus.lint.checks import FlagUse
from pdcensus.lint.shell import RUN_VALUE_OPTIONS, Arg, is_assignment
from pdcensus.lint.vllm_commands import ShellReader


def container_run(reader: ShellReader, rest: list[Arg], env: list[FlagUse]) -> None:
    """``rest``: the words after ``podman``/``docker``/``nerdctl``."""
    values = [a.value for a in rest]
    if values[:2] == ["container", "run"] or values[:2] == ["container", "create"]:
        rest, values = rest[1:], values[1:]
    if not values or values[0] not in {"run", "create"}:
        reader.other(rest)
        return
    j, entrypoint = 1, None
    while j < len(rest) and values[j].startswith("-"):
        name, eq, inline = values[j].partition("=")
        value_arg = None
        if not eq and name in RUN_VALUE_OPTIONS and j + 1 < len(rest):
            value_arg = rest[j + 1]
        elif eq:
            eq_at = rest[j].raw.index("=") + 1
            value_arg = replace(rest[j], raw=rest[j].raw[eq_at:], start=rest[j].start + eq_at, literal=None)
        if name in {"-e", "--env"} and value_arg is not None and is_assignment(value_arg.raw.strip("'\"")):
            quoted = 1 if value_arg.raw[:1] in "'\"" else 0
            reader.assign(replace(value_arg, raw=value_arg.raw[quoted:len(value_arg.raw) - quoted],
                                  start=value_arg.start + quoted, literal=None), env)
        if name == "--entrypoint" and value_arg is not None:
            entrypoint = value_arg
        j += 2 if not eq and name in RUN_VALUE_OPTIONS else 1
    after = rest[j + 1:]
    if entrypoint is not None:
        reader.command([entrypoint, *after], env)
    else:
        reader.image_argv(after, env, rest[j].value if j < len(rest) else None)


def kubectl_run(reader: ShellReader, args: list[Arg], env: list[FlagUse]) -> bool:
    """``kubectl run|create|debug ... --image=X -- ARGV``: ARGV goes to the image; True when taken."""
    values = [a.value for a in args]
    if "--" not in values or len(values) < 2 or values[1] not in {"run", "create", "debug"}:
        return False
    image = next((v.split("=", 1)[1] for v in values if v.startswith("--image=")), None)
    reader.image_argv(args[values.index("--") + 1:], env, image)
    return True


def image_argv(reader: ShellReader, argv: list[Arg], env: list[FlagUse], image: str | None = None) -> None:
    """The argv a container passes to its image's entrypoint: the engine's when it starts with a
    flag or ``serve`` and the image is radiance's (or unknown), or it passes a declared flag; a
    vLLM image's (``vllm/vllm-openai``: its entrypoint is ``vllm serve``) when it starts with a
    flag or the model."""
    if vllm_image(reader, argv, env, image):
        return
    ours = image is None or RADIANCE_CLI in image.lower() or reader.known(argv)
    if argv and (argv[0].value.startswith("-") or argv[0].value == "serve") and ours:
        reader.engine_argv(argv[1:] if argv[0].value == "serve" else argv, env)
    elif argv:
        reader.command(argv, env)
    else:
        reader.flush_env(env)


def vllm_image(reader: ShellReader, argv: list[Arg], env: list[FlagUse], image: str | None) -> bool:
    """A vLLM image's argv (``vllm/vllm-openai``: its entrypoint is ``vllm serve``) when it starts
    with a flag or the model rather than a program; True when taken."""
    if not image or VLLM_CLI not in image.lower() or RADIANCE_CLI in image.lower() or not argv:
        return False
    first = argv[0].value
    if first in {VLLM_CLI, "sh", "bash", "env", "exec"} or first.startswith(("python", "/")):
        return False
    reader.flush_env(env)
    reader.add_vllm(argv, f"{image.rsplit('/', 1)[-1].split(':')[0]} entrypoint, vllm serve")
    return True
