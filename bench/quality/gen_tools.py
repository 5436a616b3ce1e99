"""Scenario generators C (multi-step tool chains with verbose JSON) and D (coding agent)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bench.quality.gen_files import grep_output, pytest_log, python_file
from bench.quality.text import (
    TITLES,
    Call,
    Gen,
    Probe,
    Request,
    Scenario,
    assistant,
    body,
    exchange,
    numbered,
    system,
    tool_schema,
    user,
)

# -- C ------------------------------------------------------------------------------------------


def _audit(gen: Gen, n: int) -> list[dict[str, Any]]:
    return [
        {
            "ts": f"{gen.date()}T{gen.rng.randint(0, 23):02d}:{gen.rng.randint(0, 59):02d}:00Z",
            "actor": gen.person(),
            "event": gen.rng.choice(["update", "sync", "check", "note"]),
            "detail": gen.sentence(),
            "trace_id": gen.hexid(16),
        }
        for _ in range(n)
    ]


def _line_items(gen: Gen, n: int, skus: list[str] | None = None) -> list[dict[str, Any]]:
    chosen = skus or [gen.ident("SKU", 6) for _ in range(n)]
    return [
        {
            "sku": sku,
            "description": gen.words(8),
            "quantity": gen.rng.randint(1, 40),
            "unit_price": gen.amount(),
            "tax": {"code": gen.ident("TX", 3), "rate": "19%"},
            "warehouse": {"site": gen.codename(), "zone": gen.rng.choice("ABCDEF")},
            "flags": gen.rng.sample(["fragile", "hazmat", "oversize", "gift", "priority"], 2),
        }
        for sku in chosen
    ]


def order_json(gen: Gen, order_id: str, status: str, tracking: str, skus: list[str]) -> str:
    doc = {
        "order_id": order_id,
        "status": status,
        "tracking_number": tracking,
        "placed_at": gen.date(),
        "channel": gen.rng.choice(["web", "partner", "phone"]),
        "shipping_address": {
            "line1": gen.words(4),
            "city": gen.codename().title(),
            "postcode": gen.number(10000, 99999),
        },
        "items": _line_items(gen, len(skus), skus) + _line_items(gen, gen.rng.randint(4, 14)),
        "audit_log": _audit(gen, gen.rng.randint(40, 110)),
        "metadata": {"source": gen.hexid(), "schema": "v7", "notes": gen.paragraph(3)},
    }
    return json.dumps(doc, indent=2)


def _customer_json(gen: Gen, customer_id: str, name: str, manager: str) -> str:
    doc = {
        "customer_id": customer_id,
        "name": name,
        "tier": "gold",
        "contacts": [{"name": gen.person(), "role": gen.words(2)} for _ in range(6)],
        "account_manager": manager,
        "notes": gen.paragraph(4),
        "audit_log": _audit(gen, gen.rng.randint(30, 60)),
    }
    return json.dumps(doc, indent=2)


def _orders_json(gen: Gen, customer_id: str, order_ids: list[str]) -> str:
    rows = [
        {
            "order_id": o,
            "status": gen.rng.choice(["delivered", "open", "in transit"]),
            "total": gen.amount(),
            "placed_at": gen.date(),
        }
        for o in order_ids + [gen.ident("ORD", 7) for _ in range(gen.rng.randint(40, 80))]
    ]
    return json.dumps({"customer_id": customer_id, "orders": rows, "page": 1}, indent=2)


def _invoice_json(gen: Gen, invoice_id: str, total: str, status: str) -> str:
    doc = {
        "invoice_id": invoice_id,
        "status": status,
        "grand_total": total,
        "lines": _line_items(gen, gen.rng.randint(12, 30)),
        "audit_log": _audit(gen, gen.rng.randint(8, 20)),
    }
    return json.dumps(doc, indent=2)


def _tracking_json(gen: Gen, tracking: str, status: str, eta: str) -> str:
    events = [
        {"at": gen.date(), "hub": gen.codename(), "scan": gen.words(4)}
        for _ in range(gen.rng.randint(40, 90))
    ]
    return json.dumps(
        {"tracking_number": tracking, "status": status, "eta": eta, "events": events}, indent=2
    )


def _inventory_json(gen: Gen, sku: str, location: str) -> str:
    doc = {
        "sku": sku,
        "on_hand": gen.rng.randint(0, 900),
        "bin_location": location,
        "lots": [
            {"lot": gen.ident("LOT", 5), "expires": gen.date(), "qty": gen.rng.randint(1, 99)}
            for _ in range(gen.rng.randint(8, 25))
        ],
        "audit_log": _audit(gen, gen.rng.randint(5, 15)),
    }
    return json.dumps(doc, indent=2)


def _calls(
    gen: Gen, name: str, args: list[dict[str, Any]], results: list[str]
) -> list[dict[str, Any]]:
    return exchange([Call(gen.call_id(), name, a) for a in args], results)


@dataclass
class _Case:
    """The ids and values of scenario C; the ones named in probes are unique per scenario."""

    company: str
    manager: str
    customer: str
    orders: list[str]
    skus: list[str]
    bins: list[str]
    tracking: list[str]  # lost, reshipped, other order
    invoices: list[str]  # void, current
    totals: list[str]
    eta: str
    ticket: str

    @classmethod
    def draw(cls, gen: Gen) -> _Case:
        skus = [gen.ident("SKU", 6) for _ in range(3)]
        return cls(
            gen.codename().title(),
            gen.person(),
            gen.ident("CUS", 6),
            [gen.ident("ORD", 7) for _ in range(2)],
            skus,
            [gen.ident("BIN", 5) for _ in skus],
            [gen.ident("TRK", 9) for _ in range(3)],
            [gen.ident("INV", 7) for _ in range(2)],
            [gen.amount(), gen.amount()],
            gen.date(),
            gen.ident("TKT", 6),
        )

    def probes(self) -> list[Probe]:
        order = self.orders[0]
        return [
            Probe(
                f"What is the current tracking number of order {order}?",
                self.tracking[1],
                (self.tracking[0],),
            ),
            Probe(
                f"What is the grand total of the current invoice for {order}?",
                self.totals[1],
                (self.totals[0],),
            ),
            *(
                Probe(f"In which bin is {s} stored?", b)
                for s, b in zip(self.skus, self.bins, strict=True)
            ),
            Probe("Which ticket was opened for the reshipment?", self.ticket),
            Probe(f"Who is the account manager of {self.company}?", self.manager),
            Probe(f"What is the ETA of order {self.orders[1]}?", self.eta),
        ]


def tool_chains(seed: int) -> Scenario:
    gen = Gen(seed, "C")
    names = [
        "find_customer",
        "list_orders",
        "get_order",
        "get_invoice",
        "track_shipment",
        "get_inventory",
        "create_ticket",
    ]
    tools = [tool_schema(n, f"Back-office API: {n.replace('_', ' ')}.", id="string") for n in names]
    case = _Case.draw(gen)
    m: list[dict[str, Any]] = [
        system("You are a support operations agent with back-office tools. Be precise."),
        user(
            f"{case.company} says order {case.orders[0]} is late. Investigate. {gen.paragraph(1)}"
        ),
    ]
    _investigate(gen, case, m)
    _reship(gen, case, m)
    probes = case.probes()
    m.append(user("Summarise for the customer, with exact values:\n" + numbered(probes)))
    return Scenario("C", TITLES["C"], seed, [Request(body(m, tools), probes)])


def _investigate(gen: Gen, c: _Case, m: list[dict[str, Any]]) -> None:
    order, (lost, _, _) = c.orders[0], c.tracking
    m += _calls(
        gen,
        "find_customer",
        [{"id": c.company}],
        [_customer_json(gen, c.customer, c.company, c.manager)],
    )
    m += _calls(gen, "list_orders", [{"id": c.customer}], [_orders_json(gen, c.customer, c.orders)])
    m += _calls(
        gen, "get_order", [{"id": order}], [order_json(gen, order, "in transit", lost, c.skus)]
    )
    m += _calls(
        gen,
        "track_shipment",
        [{"id": lost}],
        [_tracking_json(gen, lost, "lost in transit", gen.date())],
    )
    m.append(assistant("The shipment appears lost in transit. " + gen.paragraph(2)))
    m.append(user("Check the invoice for that order too."))
    void, current = c.invoices
    m += _calls(
        gen,
        "get_invoice",
        [{"id": void}, {"id": current}],
        [
            _invoice_json(gen, void, c.totals[0], f"void, reissued as {current}"),
            _invoice_json(gen, current, c.totals[1], "open"),
        ],
    )
    m.append(assistant(f"Invoice {void} was voided and reissued. " + gen.paragraph(1)))
    m.append(user("Is the stock there to reship the three items?"))
    m += _calls(
        gen,
        "get_inventory",
        [{"id": s} for s in c.skus],
        [_inventory_json(gen, s, b) for s, b in zip(c.skus, c.bins, strict=True)],
    )
    m.append(assistant("All three items are in stock. " + gen.paragraph(2)))


def _reship(gen: Gen, c: _Case, m: list[dict[str, Any]]) -> None:
    order, (_, reshipped, other) = c.orders[0], c.tracking
    m.append(user("Please reship and open a ticket."))
    m += _calls(
        gen,
        "create_ticket",
        [{"id": order}],
        [json.dumps({"ticket_id": c.ticket, "status": "open", "queue": "logistics"})],
    )
    m += _calls(
        gen, "get_order", [{"id": order}], [order_json(gen, order, "reshipped", reshipped, c.skus)]
    )
    m.append(assistant("Reshipped under a new tracking number. " + gen.paragraph(1)))
    m.append(user(f"Also check on their other order {c.orders[1]}."))
    m += _calls(
        gen,
        "get_order",
        [{"id": c.orders[1]}],
        [order_json(gen, c.orders[1], "in transit", other, [gen.ident("SKU", 6)])],
    )
    m += _calls(
        gen, "track_shipment", [{"id": other}], [_tracking_json(gen, other, "in transit", c.eta)]
    )
    m.append(assistant("That one is on its way. " + gen.paragraph(2)))


# -- D ------------------------------------------------------------------------------------------


_CODING_TOOLS = [
    tool_schema("read_file", "Read a file.", path="string"),
    tool_schema("grep", "Search the repository.", pattern="string"),
    tool_schema("run_tests", "Run the test suite.", selector="string"),
    tool_schema("edit_file", "Replace text in a file.", path="string", old="string", new="string"),
    tool_schema("todo_write", "Replace the todo list.", items="string"),
]


@dataclass
class _Repo:
    """The planted facts of scenario D."""

    pkg: str
    const: str
    values: list[str]  # old, new
    timeout: str
    hit: str
    tests: list[str]
    todo: str
    paths: list[str]

    @classmethod
    def draw(cls, gen: Gen) -> _Repo:
        pkg = gen.codename().lower()
        fn = f"def resolve_{gen.codename().lower()}(alpha, beta, *, gamma={gen.number(2, 99)}):"
        hit = f"src/{pkg}/{gen.codename().lower()}.py:{gen.number(100, 999)}:{fn}"
        return cls(
            pkg,
            f"RETRY_BUDGET_{gen.codename()}",
            [gen.number(100, 9999), gen.number(100, 9999)],
            f"TIMEOUT_{gen.codename()} = {gen.number(5, 600)}",
            hit,
            [f"tests/test_{pkg}.py::test_{gen.codename().lower()}" for _ in range(220)],
            gen.ident("TODO", 4),
            [f"src/{pkg}/{gen.codename().lower()}.py" for _ in range(4)],
        )

    def assignment(self, k: int) -> str:
        return f"{self.const} = {self.values[k]}"

    def probes(self, first_error: str) -> list[Probe]:
        fail1, fail2 = self.tests[40], self.tests[150]
        return [
            Probe(
                f"What is the current value assignment of {self.const}?",
                self.assignment(1),
                (self.assignment(0),),
            ),
            Probe(
                "Which test fails in the most recent run?", f"FAILED {fail2}", (f"FAILED {fail1}",)
            ),
            Probe("What error did the first test run report?", first_error),
            Probe(f"What is the TIMEOUT setting in {self.paths[1]}?", self.timeout),
            Probe("Where is resolve_ defined (file:line)?", self.hit[: self.hit.index(":def ")]),
            Probe("What is the id of the todo item?", self.todo),
        ]


def coding_agent(seed: int) -> Scenario:
    gen = Gen(seed, "D")
    r = _Repo.draw(gen)
    first_error = f"retry budget exhausted after {r.values[0]} ms"
    suite = [{"selector": f"tests/test_{r.pkg}.py"}]
    m: list[dict[str, Any]] = [
        system("You are a coding agent working in a Python repository. Use the tools."),
        user(
            f"The {r.pkg} tests fail since yesterday. Find the cause and fix it. {gen.paragraph(1)}"
        ),
    ]
    m += _calls(gen, "todo_write", [{"items": f"{r.todo}: make the {r.pkg} suite green"}], ["ok"])
    m += _calls(gen, "run_tests", suite, [pytest_log(gen, r.tests, r.tests[40], first_error)])
    planted = {r.paths[0]: [r.assignment(0)], r.paths[1]: [r.timeout]}
    m += _calls(
        gen,
        "read_file",
        [{"path": p} for p in r.paths[:2]],
        [python_file(gen, p, planted[p], gen.rng.randint(60, 120)) for p in r.paths[:2]],
    )
    m += _calls(gen, "grep", [{"pattern": "def resolve_"}], [grep_output(gen, r.hit, 260)])
    m.append(assistant(f"The retry budget constant looks too small. {gen.paragraph(2)}"))
    m.append(user("Go ahead and fix it."))
    edit = {"path": r.paths[0], "old": r.assignment(0), "new": r.assignment(1)}
    m += _calls(gen, "edit_file", [edit], ["ok: 1 replacement"])
    m += _calls(
        gen,
        "run_tests",
        suite,
        [pytest_log(gen, r.tests, r.tests[150], f"expected {gen.number(2, 99)} items")],
    )
    m.append(assistant("The first failure is fixed; another test fails now. " + gen.paragraph(1)))
    m.append(user("Look at the remaining files before changing anything else."))
    reread = [*r.paths[2:], r.paths[0]]
    planted = {p: [] for p in r.paths[2:]} | {r.paths[0]: [r.assignment(1)]}
    m += _calls(
        gen,
        "read_file",
        [{"path": p} for p in reread],
        [python_file(gen, p, planted[p], gen.rng.randint(60, 120)) for p in reread],
    )
    m.append(assistant(gen.paragraph(3)))
    probes = r.probes(first_error)
    m.append(user("Before you continue, recap with exact values:\n" + numbered(probes)))
    return Scenario("D", TITLES["D"], seed, [Request(body(m, _CODING_TOOLS), probes)])
