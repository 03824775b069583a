"""`python -m specplan` runs the `specplan` command."""

from specplan.cli.main import main

raise SystemExit(main())
