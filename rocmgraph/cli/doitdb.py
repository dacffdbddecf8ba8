"""doit's own database (.doit.db): a cache of which tasks ran, set aside when it cannot be
read, so that a broken one costs a warning and not every command."""

from __future__ import annotations

import dbm
import json
import sys
from datetime import datetime
from pathlib import Path

DOIT_DB = ".doit.db"  # doit's default dep_file, beside dodo.py (doit's cwd)


def usable_doit_db(path: Path) -> None:
    """doit's record of which tasks ran is a cache: the image tags are the truth. One that
    cannot be read (a crash, a full disk, a hand) would stop every command with doit's
    traceback; it is set aside with one warning instead, and the run goes on."""
    try:
        if not any(path.parent.glob(f"{path.name}*")):
            return  # none yet
        if not dbm.whichdb(str(path)):  # None or "": files there, but none dbm can read
            raise ValueError("no database dbm knows")
        with dbm.open(str(path), "r") as db:
            for key in db.keys():  # noqa: SIM118 (dbm.gnu objects do not iterate)
                json.loads(db[key])
    except Exception:  # anything: dbm.dumb parses its index with literal_eval
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        moved = []
        for part in sorted(path.parent.glob(f"{path.name}*")):
            if ".broken-" not in part.name:
                part.rename(part.with_name(f"{part.name}.broken-{stamp}"))
                moved.append(part.name)
        print(
            f"warning: {path} cannot be read; set aside as "
            f"{', '.join(f'{name}.broken-{stamp}' for name in moved)}; which tasks ran is "
            "forgotten, what is built is not (the image tags say)",
            file=sys.stderr,
        )
