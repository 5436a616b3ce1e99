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
from proxy.settings import (
    MAX_WORKERS,
    ConfigError,
    ServerSettings,
    Settings,
    unshared_store_problem,
)
from proxy.settings.loading import load_settings
from proxy.settings.startup import startup_warnings
from proxy.workers.link import WorkerRole

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
    serve.add_argument(
        "--workers",
        type=_workers,
        help="override server.workers: processes serving the port (a number, or 'auto': one "
        "per CPU)",
    )
    serve.add_argument(
        "--allow-unshared-store",
        action="store_true",
        default=None,
        help="set server.allow_unshared_store: several workers on the memory store",
    )
    serve.add_argument("--worker", help=argparse.SUPPRESS)  # set by the supervisor (workers.link)
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


def _workers(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        count = int(value)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"1 to {MAX_WORKERS} processes, or 'auto'; not {value!r}"
        )
    return count


def with_serve_options(settings: Settings, args: argparse.Namespace) -> Settings:
    """`settings` with the command line's overrides of `server`, checked like the file's keys."""
    overrides = {
        key: value
        for key, value in (
            ("workers", args.workers),
            ("allow_unshared_store", args.allow_unshared_store),
        )
        if value is not None
    }
    if overrides:
        server = ServerSettings.model_validate({**settings.server.model_dump(), **overrides})
        settings = settings.model_copy(update={"server": server})
    problem = unshared_store_problem(settings)
    if problem:
        raise ConfigError(f"{settings.source}: {problem}")
    return settings


def check_upstream_kinds(settings: Settings) -> None:
    """Every upstream names a registered kind (`proxy.upstream.UPSTREAM_KINDS`)."""
    from proxy.upstream import unknown_upstream_kinds

    problems = unknown_upstream_kinds(list(settings.upstreams))
    if problems:
        raise ConfigError("\n".join(f"{settings.source}: {p}" for p in problems))


def check_event_loop(settings: Settings) -> None:
    """`server.event_loop` can be served here (uvloop, when required, is installed)."""
    from proxy.http.event_loop import event_loop_problem

    problem = event_loop_problem(settings.server.event_loop)
    if problem is not None:
        raise ConfigError(f"{settings.source}: server.event_loop: {problem}")


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
    from proxy.http.event_loop import chosen_loop

    auth = settings.auth
    if auth.mode == "keys":
        who = "tenants=" + ",".join(t.name for t in settings.tenants if t.keys)
    else:
        who = f"tenant={auth.passthrough_tenant}"
        if auth.allow_operator_key_in_passthrough:
            who += " operator_key_in_passthrough=allowed"
    return (
        f"store={settings.store.kind} upstreams={upstreams} "
        f"policies={','.join(policy_names)} ({policies_from}) auth={auth.mode} {who} "
        f"event_loop={chosen_loop(settings.server.event_loop)}"
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
    from proxy.logs import configure_logging

    try:
        settings = with_serve_options(load_settings(args.config), args)
        several = args.worker is not None or settings.server.worker_count() > 1
        configure_logging(settings.server.log_level, settings.server.log_format, pid=several)
        check_upstream_kinds(settings)
        check_event_loop(settings)
        with _quiet(POLICY_LOGGER):  # the app loads them again and logs their warnings once
            policies = check_policies(settings)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    if args.worker is not None:
        return _serve_app(settings, "", 0, "", WorkerRole.parse(args.worker))
    for warning in startup_warnings(settings):
        log.warning("%s: %s", settings.source, warning)
    host = args.host or settings.server.host
    port = settings.server.port if args.port is None else args.port
    summary = startup_summary(settings, policies.names(), settings.policies_dir or "bundled")
    count = settings.server.worker_count()
    if count > 1:
        return _supervise(settings, args, host, port, f"{summary} workers={count}")
    return _serve_app(settings, host, port, summary, None)


def _serve_app(
    settings: Settings, host: str, port: int, summary: str, worker: WorkerRole | None
) -> int:
    """One process serving (alone, or as a worker: then it prints nothing when it serves)."""
    from proxy.app import create_app
    from proxy.http.server import run_app

    started = False

    def listening(_: str) -> None:
        nonlocal started
        started = True
        if worker is None:
            print(f"ctxproxy {ctxproxy_version()} listening on http://{host}:{port}: {summary}")

    directory = None if worker is None else worker.directory
    try:
        app = create_app(settings, workers_dir=directory)
        run_app(app, host=host, port=port, limits=settings.server, print=listening, worker=worker)
    except Exception as exc:
        if started:  # a failure while shutting down: the traceback is worth having
            raise
        print(startup_failure(settings, exc, host, port), file=sys.stderr)
        return EXIT_CONFIG
    return 0


def _supervise(
    settings: Settings, args: argparse.Namespace, host: str, port: int, summary: str
) -> int:
    """`server.workers` processes on one port (`proxy.workers.supervisor`)."""
    import asyncio
    import shutil
    import tempfile

    from proxy.workers.listen import listening_sockets
    from proxy.workers.supervisor import Supervisor

    count = settings.server.worker_count()
    try:
        sockets = listening_sockets(host, port, count)
    except OSError as exc:
        print(startup_failure(settings, exc, host, port), file=sys.stderr)
        return EXIT_CONFIG
    bound = sockets[0].getsockname()[1]

    def listening() -> None:
        print(f"ctxproxy {ctxproxy_version()} listening on http://{host}:{bound}: {summary}")

    directory = Path(tempfile.mkdtemp(prefix="ctxproxy-workers-"))
    try:
        supervisor = Supervisor(_worker_argv(args, settings), sockets, directory, listening)
        return asyncio.run(supervisor.run())
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _worker_argv(args: argparse.Namespace, settings: Settings) -> list[str]:
    """How the supervisor starts a worker (it adds `--worker`): the same config file, read again
    at each start, and the same worker options."""
    argv = [sys.executable, "-m", "proxy.cli", "serve", "--workers", str(settings.server.workers)]
    if args.config is not None:
        argv += ["--config", str(Path(args.config).resolve())]
    if settings.server.allow_unshared_store:
        argv.append("--allow-unshared-store")
    return argv


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
