"""The `blocklab` command's subcommands, a module each (or one for a few that share a subject), loaded by
`blocklab.cli` when run or listed: a DVC stage that runs one (`blocklab check`, `blocklab track`) depends on that
module, not on the others' code or help."""
