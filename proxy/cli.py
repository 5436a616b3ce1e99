"""The `ctxproxy` command: serve, policy check/schema, prepare (offline dry run), requests (a
running proxy's request records).

`serve` checks everything it can before it starts (the config file, the policies and the tenants'
policy names): a mistake is one `file: key.path: problem` line per problem on stderr and exit
code 2, and so is anything that fails while the server starts.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from proxy import records_cli
from proxy.policy.store import PolicyLoadError, PolicyStore
from proxy.settings import ConfigError, Settings
from proxy.settings.loading import load_settings
from proxy.settings.startup import startup_warnings

EXIT_CONFIG = 2
POLICY_LOGGER = "ctxproxy.policy"
_LISTEN_ERRORS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)

log = logging.getLogger("ctxproxy")


def ctxproxy_version() -> str:
    try:
        return version("ctxproxy")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxproxy", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--version", action="version", version=f"ctxproxy {ctxproxy_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="config.yaml (default: the embedded default)")
    serve.add_argument("--host", help="override server.host")
    serve.add_argument("--port", type=int, help="override server.port")
    policy = sub.add_parser("policy", help="policy files")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    check = policy_sub.add_parser("check", help="validate a policy file or directory")
    check.add_argument("path", nargs="?", default="policies", help="default: policies/")
    schema = policy_sub.add_parser("schema", help="print (or write) the policy-file JSON schema")
    schema.add_argument("--out", help="write it to this file (default: stdout)")
    prepare = sub.add_parser("prepare", help="prepare a request offline and print the manifest")
    prepare.add_argument("request", help="a chat-completion request body (JSON file)")
    prepare.add_argument(
        "--policy", help="a policy YAML file or a bundled policy's name (default: default)"
    )
    prepare.add_argument("--model", help="override the request's model")
    prepare.add_argument("--out", help="write the prepared body here (default: stdout)")
    records_cli.add_parser(sub)
    return parser


def check_upstream_kinds(settings: Settings) -> None:
    """Every upstream names a registered kind (`proxy.upstream.UPSTREAM_KINDS`)."""
    from proxy.upstream import unknown_upstream_kinds

    problems = unknown_upstream_kinds(list(settings.upstreams))
    if problems:
        raise ConfigError("\n".join(f"{settings.source}: {p}" for p in problems))


def check_policies(settings: Settings) -> PolicyStore:
    """The policies the server will load, and every tenant's policy among them."""
    directory = None if settings.policies_dir is None else Path(settings.policies_dir)
    try:
        policies = PolicyStore.load(directory)
    except PolicyLoadError as exc:
        lines = [f"{settings.source}: policies_dir: {line}" for line in exc.problems]
        raise ConfigError("\n".join(lines)) from exc
    known = ", ".join(policies.names())
    unknown = [
        f"{settings.source}: tenants.{i}.policy: unknown policy {tenant.policy!r} (known: {known})"
        for i, tenant in enumerate(settings.tenants)
        if tenant.policy not in policies
    ]
    if unknown:
        raise ConfigError("\n".join(unknown))
    return policies


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def startup_summary(settings: Settings, policy_names: Sequence[str], policies_from: str) -> str:
    """One line: store kind, upstreams, policies and auth mode (never a key or a password)."""
    upstreams = ",".join(f"{u.name}({u.where()})" for u in settings.upstreams)
    auth = settings.auth
    if auth.mode == "keys":
        who = "tenants=" + ",".join(t.name for t in settings.tenants if t.keys)
    else:
        who = f"tenant={auth.passthrough_tenant}"
        if auth.allow_operator_key_in_passthrough:
            who += " operator_key_in_passthrough=allowed"
    return (
        f"store={settings.store.kind} upstreams={upstreams} "
        f"policies={','.join(policy_names)} ({policies_from}) auth={auth.mode} {who}"
    )


def startup_failure(settings: Settings, exc: BaseException, host: str, port: int) -> str:
    """One line for anything raised while the server starts."""
    if isinstance(exc, OSError) and exc.errno in _LISTEN_ERRORS:
        reason = exc.strerror or str(exc)
        return f"{settings.source}: server.host/port: cannot listen on {host}:{port}: {reason}"
    first = (str(exc).strip().splitlines() or [""])[0]
    if first.startswith(f"{settings.source}: "):
        return first
    return f"{settings.source}: start-up failed: {type(exc).__name__}: {first}"


def _serve(args: argparse.Namespace) -> int:
    from proxy.app import create_app
    from proxy.http.server import run_app
    from proxy.logs import configure_logging

    try:
        settings = load_settings(args.config)
        configure_logging(settings.server.log_level, settings.server.log_format)
        check_upstream_kinds(settings)
        with _quiet(POLICY_LOGGER):  # the app loads them again and logs their warnings once
            policies = check_policies(settings)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    for warning in startup_warnings(settings):
        log.warning("%s: %s", settings.source, warning)
    host = args.host or settings.server.host
    port = settings.server.port if args.port is None else args.port
    where = settings.policies_dir or "bundled"
    summary = startup_summary(settings, policies.names(), where)
    started = False

    def listening(_: str) -> None:
        nonlocal started
        started = True
        print(f"ctxproxy {ctxproxy_version()} listening on http://{host}:{port}: {summary}")

    try:
        run_app(create_app(settings), host=host, port=port, limits=settings.server, print=listening)
    except Exception as exc:
        if started:  # a failure while shutting down: the traceback is worth having
            raise
        print(startup_failure(settings, exc, host, port), file=sys.stderr)
        return EXIT_CONFIG
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "policy":
        from proxy.policy import cli as policy_cli

        if args.policy_command == "check":
            return policy_cli.check(Path(args.path), sys.stdout)
        if args.out is None:
            sys.stdout.write(policy_cli.render_schema())
        else:
            policy_cli.write_schema(Path(args.out))
        return 0
    if args.command == "requests":
        return records_cli.run_requests(args)
    from proxy.prepare_cli import run_prepare

    return run_prepare(args.request, args.policy, args.model, args.out)


if __name__ == "__main__":
    sys.exit(main())
