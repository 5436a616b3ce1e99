"""What the synthetic tools are called in one request: their own names, unless a client tool
already has one of them; then the proxy's goes by another name for that request, so a client's
tool is never taken over."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from proxy.synthetic.registry import ARTIFACT_TOOLS


def _identity(names: Collection[str]) -> Mapping[str, str]:
    return MappingProxyType({name: name for name in names})


@dataclass(frozen=True)
class ToolNames:
    """Canonical name -> this request's name, for the synthetic tools offered to it."""

    own_names: Mapping[str, str] = field(default_factory=lambda: _identity(ARTIFACT_TOOLS))
    given: Mapping[str, str] = field(default_factory=dict)
    """Canonical name -> the name preparation gave the tool (a policy's own name for it);
    a tool not listed here was given its canonical name."""

    def __contains__(self, name: object) -> bool:
        return name in self.own_names.values()

    @property
    def renamed(self) -> bool:
        return any(own != self.given.get(c, c) for c, own in self.own_names.items())

    @property
    def canonical_names(self) -> tuple[str, ...]:
        return tuple(self.own_names)

    def canonical(self, name: str) -> str:
        """The canonical name (what `registry.execute` takes) of this request's `name`."""
        return next((c for c, own in self.own_names.items() if own == name), name)

    def own(self, canonical: str) -> str:
        """This request's name of the tool called `canonical`."""
        return self.own_names.get(canonical, canonical)


def names_avoiding(
    taken: Collection[str],
    offered: Collection[str] = ARTIFACT_TOOLS,
    given: Mapping[str, str] | None = None,
) -> ToolNames:
    """The names of the `offered` tools for a request whose client tools are called `taken`
    (`given`: the names preparation gave some of them, by canonical name)."""
    given = dict(given or {})
    own = {name: _free_name(given.get(name, name), taken) for name in offered}
    return ToolNames(MappingProxyType(own), MappingProxyType(given))


def given_names(offered: Sequence[str], given: Mapping[str, str] | None) -> list[str]:
    """The names the `offered` tools have in a prepared body."""
    return [(given or {}).get(name, name) for name in offered]


def _free_name(name: str, taken: Collection[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        candidate = f"{name}_ctxproxy" + (str(n) if n > 1 else "")
        n += 1
    return candidate
