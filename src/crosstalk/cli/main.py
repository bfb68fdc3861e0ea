"""The `crosstalk` command line. Subcommands load lazily: `crosstalk send` must not pay for asyncio, the journal
or the agent runtime it never uses."""

from __future__ import annotations

import importlib
import sys

import click

from crosstalk import __version__

# name → "module:attribute"; the module is imported only when that command runs (or for --help).
_COMMANDS: dict[str, tuple[str, str]] = {
    "send": ("crosstalk.cli.send_cmd:send", "Send a message to a live agent by name or agent_id."),
    "list": ("crosstalk.cli.list_cmd:list_agents", "List the live agents on this machine."),
    "who": ("crosstalk.cli.list_cmd:who", "Show one agent's descriptor."),
    "tail": ("crosstalk.cli.tail_cmd:tail", "Follow one agent's traffic live."),
    "agent": ("crosstalk.cli.agent_cmd:agent", "Run a standalone agent."),
    "demo": ("crosstalk.cli.demo_cmd:demo", "Run agents in a temporary state root and exchange messages."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module, attr = spec[0].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help without importing every subcommand module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, spec[1]) for name, spec in sorted(_COMMANDS.items())])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crosstalk")
def cli() -> None:
    """crosstalk: messages between live AI coding-agent sessions, by name.

    State lives under $CROSSTALK_HOME (default: $XDG_STATE_HOME/crosstalk or ~/.local/state/crosstalk).
    """


def main() -> None:
    """Run the CLI. Every error is one line on stderr: `crosstalk: <what is wrong>`."""
    try:
        rv = cli.main(prog_name="crosstalk", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "")
        sys.exit(0)
    except click.UsageError as exc:
        sub = exc.ctx.command_path.partition(" ")[2] if exc.ctx else ""
        where = f" (see 'crosstalk {sub} --help')" if sub else " (see 'crosstalk --help')"
        click.echo(f"crosstalk: {exc.format_message()}{where}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
