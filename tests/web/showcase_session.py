"""One `gputop web` session drawing the showcase box's fixed frames (tests/ui/showcase.py):
what tests/web/screenshot.py photographs, the same on every machine (no hostname, no PID of
this one). Run by textual-serve with Textual's web driver: ``python -m tests.web.showcase_session``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from tests.ui.scenes import fixed_terminal, frozen_clock


def main() -> int:
    from gputop.ui.app import GputopApp
    from gputop.ui.messages import SnapshotReady
    from tests.ui.showcase import showcase_frames

    frames = showcase_frames()

    class Showcase(GputopApp):
        # Textual finds CSS_PATH beside the class's own module: here, beside the app's.
        CSS_PATH = str(Path(inspect.getfile(GputopApp)).with_name("gputop.tcss"))

        def on_ready(self) -> None:
            for frame in frames[:-2]:
                self.history.append(frame)
            for frame in frames[-2:]:
                self.post_message(SnapshotReady(frame))

    with fixed_terminal():
        app = Showcase(
            None,
            start_sampler=False,
            readonly=True,
            clock=lambda: frozen_clock(frames),
            table_refresh_s=0.0,  # one moment: the table as fresh as the panels
        )
        app.run()
    return app.return_code or 0


if __name__ == "__main__":
    sys.exit(main())
