"""``python -m voxserve.cli``: the same as the ``voxserve`` command."""

from voxserve.cli.main import main

raise SystemExit(main())
