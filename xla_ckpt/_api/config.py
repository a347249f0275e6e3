"""Typed, frozen checkpoint configuration, and the validation that builds it from plain data.

Data only: nothing is exec'd or eval'd (``config_load`` reads files and presets into this data). Every error
is a ``ConfigError`` naming the file, the dotted key (``checkpoint[1].policy``), the bad value and what is
allowed (policy names from the registry).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from xla_ckpt._record.opcall import Policy, resolve_op
from xla_ckpt._policy import registry as policies

__all__ = ["Config", "Rule", "PolicySpec", "ConfigError", "glob_regex", "parse"]


class ConfigError(ValueError):
    """A configuration problem: ``<file>: <dotted key>: <what is wrong and what is allowed>``."""


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy name and its parameters (lists stored as tuples, nested specs as specs), or a
    policy object or function given in Python (``built``; ``name`` is then its repr).

    Example:
        >>> PolicySpec("save_only_these_names", (("names", ("qkv",)),)).build()
        save_only_these_names('qkv')
        >>> PolicySpec.of(xla_ckpt.policies.memory_budget(0.3)).build()
        memory_budget(0.3)
    """

    name: str
    params: tuple[tuple[str, Any], ...] = ()
    # Not compared or hashed: a planning policy holds its plans and is not hashable; its repr is the name.
    built: Any = field(default=None, compare=False, hash=False)

    @staticmethod
    def of(policy: Policy) -> "PolicySpec":
        """The spec of a policy object or ``(OpCall) -> Decision`` function (a config written in Python)."""
        return PolicySpec(repr(policy), built=policy)

    def build(self) -> Policy:
        if self.built is not None:
            return self.built
        kwargs = {k: _materialise(v, ops=k == "ops") for k, v in self.params}
        return policies.get(self.name, **kwargs)

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(f'{k}={_show(v)}' for k, v in self.params)})"


@dataclass(frozen=True)
class Rule:
    """Select modules by name glob, class name and/or ``blocks``; wrap every ``every``-th with ``policy``.

    ``blocks = true`` selects the model's transformer blocks without naming their class
    (``xla_ckpt.find_blocks``); with ``match`` or ``classes`` too, a module must satisfy all of them.
    """

    policy: PolicySpec
    match: tuple[str, ...] = ()
    classes: tuple[str, ...] = ()
    blocks: bool = False
    every: int = 1
    enabled: bool = True  # false: an override that leaves the selected modules unwrapped

    def describe(self) -> str:
        sel = []
        if self.blocks:
            sel.append("blocks")
        if self.match:
            sel.append("match=" + ",".join(self.match))
        if self.classes:
            sel.append("classes=" + ",".join(self.classes))
        if self.every != 1:
            sel.append(f"every={self.every}")
        return " ".join(sel)


@dataclass(frozen=True)
class Config:
    """Ordered rules (later ones override earlier ones) and the library switches."""

    checkpoint: tuple[Rule, ...] = ()
    patch_linear: bool = False
    weights_by_reference: bool = False
    # On XLA, the nn.Linear / nn.LayerNorm modules outside the checkpointed ones keep what they keep on CPU
    # (the weight, not a transposed copy; the input, not also its normalized copy): _api/outside.py.
    correct_outside: bool = True
    verify: bool = False  # every wrapped module recomputes its saved outputs too and compares (checkpoint verify=)
    scan: bool = False  # the HF decoder stack runs as one torch_xla scan, its body marked by the blocks' policy
    # Checkpoint only blocks 0, n, 2n, ... of the model's transformer blocks (xla_ckpt.find_blocks, in module
    # order); the others run plainly and keep their activations (Hugging Face's ``every_n_layers``).
    every_n_layers: int = 1
    description: str = ""
    source: str = field(default="<dict>", compare=False)


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return str(v) if isinstance(v, PolicySpec) else repr(v)


def _materialise(v: Any, ops: bool) -> Any:
    """Config data to policy arguments: nested specs built, op names (under ``ops``) resolved."""
    if isinstance(v, PolicySpec):
        return v.build()
    if isinstance(v, tuple):
        return [_materialise(x, ops) for x in v]
    if ops and isinstance(v, str):
        return resolve_op(v)
    return v


_GLOB_OK = re.compile(r"^[A-Za-z0-9_.*?\[\]!-]+$")


def glob_regex(pattern: str) -> "re.Pattern[str]":
    """A module-path glob as a regex: ``*`` stays within one path component, ``**`` crosses dots."""
    if not pattern or not _GLOB_OK.match(pattern) or pattern.count("[") != pattern.count("]"):
        raise ValueError(pattern)
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^.]*")
        elif c == "?":
            out.append("[^.]")
        elif c == "[":
            j = pattern.index("]", i)
            body = pattern[i + 1 : j]
            if not body or "[" in body:
                raise ValueError(pattern)
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = j + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$")


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.source}: {key}: {msg}")

    def keys(self, data: Any, key: str, allowed: set[str]) -> Mapping[str, Any]:
        if not isinstance(data, Mapping):
            raise self.fail(key or "<top>", f"expected a table/mapping, got {data!r}")
        for k in data:
            if k not in allowed:
                where = f"{key}.{k}" if key else str(k)
                raise self.fail(where, f"unknown key {k!r}; allowed keys: {', '.join(sorted(allowed))}")
        return data

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(x, str) and x for x in items):
            raise self.fail(key, f"expected a string or a list of non-empty strings, got {value!r}")
        return tuple(items)

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {value!r}")
        return value

    def config(self, data: Any) -> Config:
        d = self.keys(data, "", {"checkpoint", "patch_linear", "weights_by_reference", "correct_outside",
                                     "verify", "scan", "description", "every_n_layers"})
        rules = d.get("checkpoint", [])
        if not isinstance(rules, list):
            raise self.fail("checkpoint", f"expected a list of rules ([[checkpoint]] tables), got {rules!r}")
        every_n = d.get("every_n_layers", 1)
        if isinstance(every_n, bool) or not isinstance(every_n, int) or every_n < 1:
            raise self.fail("every_n_layers", f"expected an integer >= 1 (1: every transformer block is "
                            f"checkpointed; 2: blocks 0, 2, 4, ...; 3: blocks 0, 3, 6, ...), got {every_n!r}")
        desc = d.get("description", "")
        if not isinstance(desc, str):
            raise self.fail("description", f"expected a string, got {desc!r}")
        return Config(
            checkpoint=tuple(self.rule(r, f"checkpoint[{i}]") for i, r in enumerate(rules)),
            patch_linear=self.boolean(d.get("patch_linear", False), "patch_linear"),
            weights_by_reference=self.boolean(d.get("weights_by_reference", False), "weights_by_reference"),
            correct_outside=self.boolean(d.get("correct_outside", True), "correct_outside"),
            verify=self.boolean(d.get("verify", False), "verify"),
            scan=self.boolean(d.get("scan", False), "scan"),
            every_n_layers=every_n,
            description=desc,
            source=self.source,
        )

    def rule(self, data: Any, key: str) -> Rule:
        d = self.keys(data, key, {"match", "classes", "blocks", "every", "policy", "budget", "enabled"})
        match = self.strings(d["match"], f"{key}.match") if "match" in d else ()
        for g in match:
            try:
                glob_regex(g)
            except ValueError:
                raise self.fail(f"{key}.match", f"bad glob {g!r}: use module-path characters, '*' (one path "
                                "component), '**' (any depth), '?' and balanced '[...]'") from None
        classes = self.strings(d["classes"], f"{key}.classes") if "classes" in d else ()
        blocks = self.boolean(d.get("blocks", False), f"{key}.blocks")
        if not match and not classes and not blocks:
            raise self.fail(key, "a rule needs 'blocks = true' (the model's transformer blocks), 'match' "
                            "(module-path globs) and/or 'classes' (class names)")
        every = d.get("every", 1)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise self.fail(f"{key}.every", f"expected an integer >= 1, got {every!r}")
        enabled = self.boolean(d.get("enabled", True), f"{key}.enabled")
        if "budget" in d:
            # `budget = 0.3` is short for `policy = { name = "memory_budget", fraction = 0.3 }`.
            if "policy" in d:
                raise self.fail(f"{key}.budget",
                                "give either 'budget' (a memory_budget fraction) or 'policy', not both")
            b = d["budget"]
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= 1:  # NaN fails too
                raise self.fail(f"{key}.budget", f"expected a fraction in (0, 1] of the bytes kept without "
                                f"checkpointing (0.3 keeps at most 30%), got {b!r}")
            return Rule(policy=self.policy({"name": "memory_budget", "fraction": b}, f"{key}.budget"), match=match,
                        classes=classes, blocks=blocks, every=every, enabled=enabled)
        if "policy" not in d and enabled:
            raise self.fail(f"{key}.policy", f"missing; allowed policies: {', '.join(policies.names())}")
        spec = self.policy(d.get("policy", "nothing_saveable"), f"{key}.policy")
        return Rule(policy=spec, match=match, classes=classes, blocks=blocks, every=every, enabled=enabled)

    def policy(self, value: Any, key: str) -> PolicySpec:
        if callable(value) and not isinstance(value, type):  # a dict written in Python may hold the object itself
            return PolicySpec.of(value)
        if isinstance(value, str):
            name, params = value, {}
        elif isinstance(value, Mapping):
            if "name" not in value:
                raise self.fail(f"{key}.name", f"missing; allowed policies: {', '.join(policies.names())}")
            name = value["name"]
            params = {k: v for k, v in value.items() if k != "name"}
        else:
            raise self.fail(key, _not_data(value))
        if name not in policies.names():
            allowed = ", ".join(policies.names())
            raise self.fail(key, f"unknown policy {name!r}; allowed: {allowed}.{policies.suggest(name)}")
        spec = PolicySpec(name, tuple((k, self.param(v, f"{key}.{k}")) for k, v in sorted(params.items())))
        try:
            spec.build()
        except KeyError as e:
            raise self.fail(
                key, f"unknown op {e.args[0]!r}; write ops as 'aten.<op>' or 'aten.<op>.<overload>'") from None
        except (TypeError, ValueError) as e:
            raise self.fail(key, str(e)) from None
        return spec

    def param(self, value: Any, key: str) -> Any:
        if key.endswith(".policy"):
            # A nested policy (``offload``'s): a name or a table with 'name', checked like a rule's.
            return self.policy(value, key)
        if isinstance(value, list):
            # A list under 'policies' holds nested policy specs; elsewhere plain values.
            if key.endswith(".policies"):
                return tuple(self.policy(v, f"{key}[{i}]") for i, v in enumerate(value))
            return tuple(self.param(v, f"{key}[{i}]") for i, v in enumerate(value))
        if isinstance(value, (str, int, float, bool)):
            return value
        raise self.fail(key, f"expected a string, number, boolean or list, got {value!r}")


def _not_data(value: Any) -> str:
    """The error for a policy value that is neither a name, a table nor a policy."""
    return (f"expected a policy name or a table with 'name', got {value!r} (a dict written in Python may also hold "
            f"a policy object or an (OpCall) -> Decision function); allowed names: {', '.join(policies.names())}")


def parse(data: Any, source: str = "<dict>") -> Config:
    """Validate plain data (a file's contents, or a dict) into a ``Config``; errors name ``source``."""
    return _Parser(source).config(data)
