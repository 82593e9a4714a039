"""``coevo completion bash|zsh``: a shell completion script, written from the command line's own parser.

The script is generated from :func:`coevo.run.cli.build_parser`, so it
always knows every command and option; it completes commands, each
command's options, the names of the bundled experiments after ``coevo run``,
and file names everywhere else. It is static text (no Python runs at each
TAB), so completion is instant::

    coevo completion bash > ~/.local/share/bash-completion/completions/coevo
    eval "$(coevo completion zsh)"   # in ~/.zshrc
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from coevo.arena.examples import bundled
from coevo.run.commands import EXIT_OK

__all__ = ["add_commands", "bash_script", "cmd_completion"]


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(
        flag
        for action in parser._actions
        for flag in action.option_strings
        if flag.startswith("--")
    )


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _choices(name: str, parser: argparse.ArgumentParser) -> list[str]:
    """``case`` lines completing the values of ``name``'s options (and positionals) that have choices."""
    lines = []
    for action in parser._actions:
        if not action.choices or isinstance(action, argparse._SubParsersAction):
            continue
        words = shlex.quote(" ".join(str(c) for c in action.choices))
        for flag in action.option_strings or ["@"]:  # @: the command's first positional
            lines.append(f'        "{name} {flag}") choices={words} ;;')
    return lines


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The bash completion function for ``parser`` (also loaded by zsh through ``bashcompinit``)."""
    commands = _commands(parser)
    cases = "\n".join(
        f"        {name}) opts={shlex.quote(' '.join(_options(sub)))} ;;"
        for name, sub in sorted(commands.items())
    )
    experiments = " ".join(b.name for b in bundled() if b.kind == "experiment")
    bundled_names = " ".join(b.name for b in bundled())
    valued = "\n".join(
        line for name, sub in sorted(commands.items()) for line in _choices(name, sub)
    )
    top = " ".join([*sorted(commands), *_options(parser)])
    return f"""# coevo shell completion (written by `coevo completion`; regenerate after upgrading coevo)
_coevo() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} cmd=${{COMP_WORDS[1]}} opts="" choices=""
    local prev=${{COMP_WORDS[COMP_CWORD-1]}} first=""
    [ "$COMP_CWORD" -eq 2 ] && first="@"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W {shlex.quote(top)} -- "$cur"))
        return
    fi
    case "$cmd" in
{cases}
    esac
    case "$cmd $prev" in
{valued}
        "examples --copy") choices={shlex.quote(bundled_names)} ;;
    esac
    if [ -z "$choices" ] && [ -n "$first" ] && [[ "$cur" != -* ]]; then
        case "$cmd $first" in
{valued}
        esac
    fi
    if [ -n "$choices" ]; then
        COMPREPLY=($(compgen -W "$choices" -- "$cur"))
    elif [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [ "$cmd" = run ] && [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W {shlex.quote(experiments)} -- "$cur") $(compgen -f -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _coevo coevo
"""


def cmd_completion(args: argparse.Namespace) -> int:
    """``coevo completion SHELL``."""
    script = bash_script(args.root_parser)
    if args.shell == "zsh":
        script = "autoload -U +X bashcompinit && bashcompinit\n" + script
    sys.stdout.write(script)
    return EXIT_OK


def add_commands(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``completion`` to the ``coevo`` command."""
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh)",
        formatter_class=fmt,
        description=(
            "Print a completion script for SHELL on standard output: commands, their options,\n"
            "the bundled experiments after `coevo run`, and file names."
        ),
        epilog=(
            "examples:\n"
            "  coevo completion bash > ~/.local/share/bash-completion/completions/coevo\n"
            "  echo 'eval \"$(coevo completion zsh)\"' >> ~/.zshrc"
        ),
    )
    completion.add_argument("shell", choices=["bash", "zsh"])
    completion.set_defaults(func=cmd_completion)
