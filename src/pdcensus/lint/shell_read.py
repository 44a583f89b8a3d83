"""Engine invocations in shell: which commands run the engine, and every flag they can pass.

A script is read as the shell would run it (words from :mod:`pdcensus.lint.shell`):

* commands split at ``; & && || | ( ) ;;`` and newlines; ``if``/``elif``/``else``/``case``
  arms and a command after ``&&``/``||`` are *conditional*: their flags are checked, and a
  finding says the branch passes it;
* the program behind ``sudo``, ``env``, ``exec``, ``timeout``, ``nohup``, ``nice``,
  ``stdbuf``, ``taskset``, ``numactl``, ``tini``/``gosu`` and leading ``NAME=value``
  assignments; ``bash -c '...'`` is read as a script; ``podman run``/``docker run``/``nerdctl
  run`` give the argv after the image (``-e RADIANCE_*=...`` are its env lines);
* a command is the engine's when its program is ``radiance*`` (or ``python -m radiance...``),
  or a program named by a path or a variable (``"$ENGINE"``, ``./serve.sh``,
  ``/opt/bin/engine``) given ``serve`` or a flag the pinned build declares. A plain word is
  another program (``git merge --ff-only``, ``curl --max-time``, ``vllm serve``) or output text
  in a code block (``arm --prefill-interleave 2: ENGAGED``), and is never read;
* variables: ``ARGS="$ARGS --flag v"``, ``args+=(--flag v)``, ``export``/``local``/
  ``declare``; ``$ARGS``, ``"${args[@]}"`` in an engine command expand to every value
  assigned anywhere in the file; ``${X:+--flag v}`` passes its words conditionally;
  ``--flag "${X:-default}"`` checks the default. A variable never expanded, whose value holds
  a flag of the build, is read as an argv fragment (a snippet, an env file); one expanded
  only by other programs is left alone;
* ``RADIANCE_*=value`` anywhere (prefix, ``export``, ``env``, ``-e``, an env-file heredoc) is
  checked as the flag it maps to; a heredoc that writes a script, unit, Dockerfile or manifest
  (``cat > /etc/systemd/system/radiance.service <<EOF``) goes to that file's reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pdcensus.advice.knobs import flag_for_env_var
from pdcensus.advice.model import Severity
from pdcensus.engines.radiance import CLI as RADIANCE_CLI
from pdcensus.engines.vllm import CLI as VLLM_CLI
from pdcensus.lint.checks import Checker, FlagUse
from pdcensus.lint.containers import container_run, image_argv, kubectl_run
from pdcensus.lint.vllm_commands import OTHER_ENGINES, check_vllm, python_module, via_variable, vllm_cli
from pdcensus.lint.model import Snippet
from pdcensus.lint.shell import Arg, Heredoc, Word, commands, function_spans, is_assignment, tokenize, unquote

NON_ENGINE = frozenset({
    "curl", "wget", "kubectl", "tr", "grep", "egrep", "fgrep", "sed", "awk", "promtool", "prometheus",
    "pdcensus", "jq", "yq", "ssh", "scp", "rsync", "systemctl", "journalctl", "git", "pip", "pip3", "ls",
    "cat", "sort", "head", "tail", "xargs", "find", "echo", "printf", "cd", "mkdir", "rm", "cp", "mv",
    "tee", "less", "watch", "sleep", "nvidia-smi", "helm", "make", "pidof", "pgrep", "pkill", "kill",
    "ps", "top", "htop", "uniq", "wc", "cut", "date", "unset", "read", "test", "[", "[[", "set", "trap",
    "source", ".", "exit", "return", "shift", "wait", "true", "false", "chmod", "chown", "ln", "touch",
    "apt-get", "apt", "dnf", "yum", "apk", "npm", "uv", "poetry", "gh", "docker-compose", "openssl",
    "base64", "sha256sum", "tar", "gzip", "unzip", "ssh-keygen", "hadolint", "shellcheck", "ruff",
    "pytest", "mypy", "pre-commit", "gcloud", "aws", "az", "terraform", "ansible", "ansible-playbook",
})
_PREFIX_ARGS = {  # prefix program -> its options that take a value
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir", "--split-string"},
    "exec": {"-a"}, "nohup": set(), "time": set(), "command": set(), "builtin": set(), "setsid": set(),
    "stdbuf": {"-i", "-o", "-e"}, "nice": {"-n", "--adjustment"}, "ionice": {"-c", "-n", "-p"}, "chrt": set(),
    "numactl": {"-N", "-m", "-C", "-p", "-i"}, "tini": set(), "dumb-init": set(), "runuser": {"-u", "-g"},
    "systemd-run": {"-p", "-u"},
}
_NEEDS_OPERAND = {"timeout": 1, "taskset": 1, "gosu": 1, "su-exec": 1, "chrt": 1}
_CONTAINER = {"podman", "docker", "nerdctl"}
_FLAG = re.compile(r"(--[a-z0-9][a-z0-9-]*[a-z0-9])(?:=(.*))?", re.S)
_PLAIN_REF = re.compile(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)(?:\[[@*]\])?\})")
_OP_REF = re.compile(r"\$\{([A-Za-z_]\w*)(:?[-+=?])(.*)\}", re.S)
_ANY_REF = re.compile(r"\$\{?([A-Za-z_]\w*)")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?(RADIANCE_[A-Z0-9_]+)=(.*)$", re.M)
_NEGATIVE = re.compile(r"-\d+(?:\.\d+)?")  # a negative value, not an option


@dataclass
class _Assignment:
    args: list[Arg]
    conditional: bool


@dataclass
class ShellReader:
    """Reads the shell snippets of one file, then checks every engine invocation in them."""

    checker: Checker
    assignments: dict[str, list[_Assignment]] = field(default_factory=dict)
    engine: list[tuple[list[Arg], list[FlagUse]]] = field(default_factory=list)
    vllm: list[tuple[list[Arg], str]] = field(default_factory=list)  # vLLM argv, how it was spelled
    engine_vars: set[str] = field(default_factory=set)
    other_vars: set[str] = field(default_factory=set)
    heredoc: Callable[[Snippet], bool] | None = None  # reads a heredoc that writes a unit, manifest...
    forwarders: set[str] = field(default_factory=set)  # functions whose arguments reach the engine
    pending_env: list[tuple[str, Arg, tuple[int, int]]] = field(default_factory=list)
    _spans: list[tuple[str, int, int]] = field(default_factory=list)

    def read(self, snippet: Snippet, conditional: bool = False) -> None:
        tokens = tokenize(snippet.text)
        self._spans = function_spans(tokens)
        for words, cond in commands(tokens):
            self.command([Arg(w.raw, snippet, w.start, cond or conditional) for w in words])
        for tok in tokens:
            if isinstance(tok, Heredoc):
                body = tok.text[:tok.text.rstrip("\n").rfind("\n") + 1]  # without the delimiter line
                if self.heredoc is not None and self.heredoc(_shifted(Snippet(snippet.path, body, ()),
                                                                      Arg(body, snippet, tok.start), 0)):
                    continue
                for m in _ENV_LINE.finditer(tok.text):
                    arg = Arg(m.group(2).strip(), snippet, tok.start + m.start(2), conditional)
                    self._env(m.group(1), arg, snippet.position(tok.start + m.start(1)), None)

    def _env(self, name: str, value: Arg, name_at: tuple[int, int], into: list[FlagUse] | None) -> None:
        use = self.checker.env(name, value.value, name_at, value.at(), value.conditional)
        if use is not None and "$" in value.raw:
            use = FlagUse(use.flag, None, use.flag_at, None, use.conditional, use.via)
        if use is None:
            return
        if into is None:
            self.checker.invocation([use])
        else:
            into.append(use)

    def assign(self, arg: Arg, env: list[FlagUse] | None) -> None:
        eq = arg.raw.index("=")
        name = re.sub(r"\[.*$", "", arg.raw[:eq].rstrip("+"))
        raw = arg.raw[eq + 1:]
        base = arg.start + eq + 1
        flag = flag_for_env_var(name)
        if flag is not None and flag in self.checker.schema:
            self._env(name, Arg(raw, arg.snippet, base, arg.conditional), arg.at(), env)
            return
        if flag is not None:  # RADIANCE_ARGS="...": an argv variable if an engine command expands it
            self.pending_env.append((name, Arg(raw, arg.snippet, base, arg.conditional), arg.at()))
        inner: str | None = None
        if raw.startswith("(") and raw.endswith(")"):
            inner, base = raw[1:-1], base + 1
        elif len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            inner, base = raw[1:-1], base + 1
        elif any(c.isspace() for c in raw):  # blanks here come unquoted from a unit's Environment=: split
            inner = raw
        if inner is None:
            args = [Arg(raw, arg.snippet, base, arg.conditional)] if raw else []
        else:
            args = [Arg(w.raw, arg.snippet, base + w.start, arg.conditional)
                    for w in tokenize(inner) if isinstance(w, Word)]
        self.assignments.setdefault(name, []).append(_Assignment(args, arg.conditional))

    def command(self, args: list[Arg], env: list[FlagUse] | None = None) -> None:
        env = [] if env is None else env
        i = 0
        while i < len(args) and is_assignment(args[i].raw):
            self.assign(args[i], env)
            i += 1
        if i >= len(args):
            self.flush_env(env)
            return
        program = args[i].value.rsplit("/", 1)[-1]
        if program in self.forwarders:  # launch() { exec radiance serve ... "$@"; }; launch --flag v
            self.engine_argv(args[i + 1:], env)
            return
        if program in {"$", "%"}:  # a prompt copied with the command
            self.command(args[i + 1:], env)
            return
        if program == "kubectl" and kubectl_run(self, args[i:], env):
            return
        if program in {"export", "declare", "typeset", "local", "readonly"}:
            for arg in args[i + 1:]:
                if is_assignment(arg.raw):
                    self.assign(arg, None)
            return
        if program in _PREFIX_ARGS or program in _NEEDS_OPERAND:
            j = i + 1
            takes = _PREFIX_ARGS.get(program, set())
            while j < len(args) and (args[j].value.startswith("-") or (program == "env" and is_assignment(args[j].raw))):
                if program == "env" and is_assignment(args[j].raw):
                    self.assign(args[j], env)
                j += 2 if args[j].value in takes else 1
            j += _NEEDS_OPERAND.get(program, 0)
            self.command(args[j:], env)
            return
        rest = args[i + 1:]
        if program in {"bash", "sh", "zsh", "dash", "ksh"}:
            for k, arg in enumerate(rest[:-1]):
                if re.fullmatch(r"-[a-z]*c[a-z]*", arg.value):
                    script = rest[k + 1]
                    if script.literal is not None:
                        self.read(script.snippet, script.conditional)
                        continue
                    quoted = script.raw[:1] in "'\""
                    body = script.raw[1:-1] if quoted else script.raw
                    inner = Snippet(script.snippet.path, body, ())
                    self.read(_shifted(inner, script, 1 if quoted else 0), script.conditional)
            return
        if program in _CONTAINER:
            container_run(self, rest, env)
            return
        if program.startswith("python"):
            values = [a.value for a in rest]
            module = values[values.index("-m") + 1] if "-m" in values[:-1] else ""
            if module.startswith(RADIANCE_CLI):
                self.engine_argv(rest[values.index("-m") + 2:], env)
            elif module:
                python_module(self, module, args[i], rest[values.index("-m") + 2:], env)
            else:
                self.other(args)
            return
        if program == VLLM_CLI:
            vllm_cli(self, args[i], rest, env)
            return
        if program in OTHER_ENGINES and rest:  # a bare name in prose is no command
            self.not_checked(args[i], f"{program} is an engine whose flags lint does not know")
            self.other(args)
            return
        if via_variable(self, args[i], rest, env):
            return
        if program.startswith(RADIANCE_CLI):
            self.engine_argv(rest, env)
            return
        if program in NON_ENGINE or (program.startswith("-") and not _FLAG.fullmatch(program)):
            self.other(args)
            return
        # an unnamed program (a path, a variable) is the engine when it is given `serve` or a
        # flag the pinned build declares; a plain word (`arm`, `vllm`, output text) never is
        unnamed = "/" in args[i].raw or _ANY_REF.match(args[i].raw.strip("'\"")) is not None
        if unnamed and ((rest and rest[0].value == "serve") or self.known(rest)):
            self.engine_argv(rest, env)
        else:
            if unnamed and _ANY_REF.match(args[i].raw.strip("'\"")) and rest and rest[0].value == "serve":
                self.not_checked(args[i], f"the program {args[i].raw} is a variable lint cannot resolve")
            self.other(args)

    def image_argv(self, argv: list[Arg], env: list[FlagUse], image: str | None = None) -> None:
        image_argv(self, argv, env, image)

    def known(self, argv: list[Arg]) -> bool:
        """True when an argv passes a flag the pinned build declares."""
        return any((m := _FLAG.fullmatch(a.value)) is not None and m.group(1) in self.checker.schema
                   for a in self._flatten(argv, frozenset()))

    def add_vllm(self, argv: list[Arg], form: str) -> None:
        for arg in argv:
            self.engine_vars.update(m.group(1) for m in _ANY_REF.finditer(arg.raw))
        self.vllm.append((argv, form))

    def expand(self, arg: Arg) -> list[list[Arg]] | None:
        return self._expand(arg, frozenset())

    def flatten(self, argv: list[Arg]) -> list[Arg]:
        return self._flatten(argv, frozenset())

    def references(self, arg: Arg) -> list[str]:
        return [m.group(1) for m in _ANY_REF.finditer(arg.raw)]

    def not_checked(self, at: Arg, why: str) -> None:
        self.checker.add("command-not-checked", Severity.INFO, at.at(), at.value, f"{why}: not checked",
                         at.conditional)

    def flush_env(self, env: list[FlagUse]) -> None:
        for use in env:
            self.checker.invocation([use])

    def other(self, args: list[Arg]) -> None:
        for arg in args:
            self.other_vars.update(m.group(1) for m in _ANY_REF.finditer(arg.raw))

    def engine_argv(self, argv: list[Arg], env: list[FlagUse]) -> None:
        for arg in argv:
            self.engine_vars.update(m.group(1) for m in _ANY_REF.finditer(arg.raw))
        self.engine.append((argv, env))
        if argv and any(a.raw.strip('"') in {"$@", "$*", "${@}", "${*}"} for a in argv):
            for name, lo, hi in self._spans:  # a function that passes its arguments to the engine
                if lo <= argv[0].start <= hi:
                    self.forwarders.add(name)

    def _expand(self, arg: Arg, seen: frozenset[str]) -> list[list[Arg]] | None:
        """The alternatives a pure variable reference stands for (None when ``arg`` is not one)."""
        raw = arg.raw[1:-1] if len(arg.raw) >= 2 and arg.raw[0] == arg.raw[-1] == '"' else arg.raw
        shift = 1 if raw != arg.raw else 0
        plain = _PLAIN_REF.fullmatch(raw)
        op = _OP_REF.fullmatch(raw) if plain is None else None
        if plain is None and op is None:
            return None
        name = (plain.group(1) or plain.group(2)) if plain else op.group(1)  # type: ignore[union-attr]
        if name in seen and op is None:
            return []
        assigned = [[Arg(a.raw, a.snippet, a.start, a.conditional or asg.conditional or arg.conditional)
                     for a in asg.args] for asg in self.assignments.get(name, [])] if name not in seen else []
        if op is None:
            return assigned
        base = arg.start + shift + op.start(3)
        alt = [Arg(w.raw, arg.snippet, base + w.start, True) for w in tokenize(op.group(3)) if isinstance(w, Word)]
        if op.group(2).endswith("+"):
            return [alt]
        if op.group(2).endswith("?"):
            return assigned
        return [[Arg(a.raw, a.snippet, a.start, True) for a in alts] for alts in assigned] + [alt]

    def _flatten(self, argv: list[Arg], seen: frozenset[str]) -> list[Arg]:
        out: list[Arg] = []
        for arg in argv:
            alternatives = self._expand(arg, seen)
            if alternatives is None:
                out.append(arg)
                continue
            names = frozenset(m.group(1) for m in _ANY_REF.finditer(arg.raw))
            for alt in alternatives:
                out.extend(self._flatten(alt, seen | names))
        return out

    def _values(self, arg: Arg, seen: frozenset[str]) -> list[Arg]:
        alternatives = self._expand(arg, seen)
        if alternatives is None:
            return [arg]
        names = frozenset(m.group(1) for m in _ANY_REF.finditer(arg.raw))
        return [v for alt in alternatives if alt for v in self._values(alt[0], seen | names)]

    def uses(self, argv: list[Arg], conditional: bool = False,
             seen: frozenset[str] = frozenset()) -> list[FlagUse]:
        """The flags an argv passes, each value alternative (branches, defaults) on its own."""
        out: list[FlagUse] = []
        i = 0
        while i < len(argv):
            arg = argv[i]
            i += 1
            alternatives = self._expand(arg, seen)
            if alternatives is not None:
                names = frozenset(m.group(1) for m in _ANY_REF.finditer(arg.raw))
                for alt in alternatives:
                    out.extend(self.uses(alt, conditional, seen | names))
                continue
            m = _FLAG.fullmatch(arg.value)
            if m is None:
                continue
            cond = conditional or arg.conditional
            spec = self.checker.schema.get(m.group(1))
            if m.group(2) is not None:
                eq = max(arg.raw.find("="), 0)
                literal = m.group(2) if arg.literal is not None else None  # a manifest's element, as listed
                values = self._values(Arg(arg.raw[eq + 1:].strip("'\""), arg.snippet, arg.start + eq + 1, cond,
                                          literal), seen)
            elif spec is not None and spec.takes_value and i < len(argv) and (
                    self._expand(argv[i], seen) is not None or not argv[i].value.startswith("-")
                    or _NEGATIVE.fullmatch(argv[i].value)):
                values = self._values(argv[i], seen)
                i += 1
            else:
                out.append(FlagUse(m.group(1), None, arg.at(), None, cond))
                continue
            if not values:
                out.append(FlagUse(m.group(1), None, arg.at(), None, cond))
            for value in values:
                out.append(FlagUse(m.group(1), value.value, arg.at(), value.at(),
                                   cond or value.conditional))
        return out

    def finish(self) -> None:
        """Check every engine invocation, then argv fragments held by variables never expanded."""
        for argv, env in self.engine:
            if not self.checker.pinned:  # said once per command (where its argv starts)
                if argv:
                    self.not_checked(argv[0], "an engine command of a pinned build, and no --source was given")
                continue
            self.checker.invocation(self.uses(argv) + env)
        for argv, form in self.vllm:
            check_vllm(self, argv, form)
        for name, value, at in self.pending_env:
            if name not in self.engine_vars:
                self._env(name, value, at, None)
        for name, assignments in self.assignments.items():
            if name in self.engine_vars or name in self.other_vars:
                continue
            argv = [a for asg in assignments for a in asg.args]
            flags = [_FLAG.fullmatch(a.value) for a in argv]
            if any(m is not None and m.group(1) in self.checker.schema for m in flags):
                self.checker.invocation(self.uses(argv))


def _shifted(inner: Snippet, at: Arg, quote: int) -> Snippet:
    """``inner``'s text placed where it sits inside ``at`` (after ``quote`` opening characters)."""
    base = at.start + quote
    origins = []
    offset = 0
    for piece in inner.text.split("\n"):
        origins.append(at.snippet.position(base + offset))
        offset += len(piece) + 1
    return Snippet(inner.path, inner.text, tuple(origins))

