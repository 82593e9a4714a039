"""TensorBoard: each generation's metrics as scalars of an event file, the report's figures as images."""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from coevo.run.tracking.tracker import Tracker

__all__ = ["TensorBoardTracker"]


def _png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


class TensorBoardTracker(Tracker):
    """Event files in ``record["logdir"]``: a resumed run writes a new file in the same directory."""

    name = "tensorboard"

    def where(self) -> str:
        """The command that shows the run."""
        return f"tensorboard --logdir {self.record['logdir']}"

    def open(self, *, resumed: bool) -> None:
        """Start a new event file in the log directory."""
        # optional: the tracking extra, imported only when TensorBoard is configured
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        # a new event file in the same directory: TensorBoard shows a resumed run as one run
        self._writer = EventFileWriter(self.record["logdir"], max_queue_size=64, flush_secs=30)

    def _write(self, gen: int, values: list[Any]) -> None:
        self._writer.add_event(
            self._event(step=gen, wall_time=time.time(), summary=self._summary(value=values))
        )
        self._writer.flush()

    def scalars(self, gen: int, metrics: Mapping[str, float]) -> None:
        """One event of scalars, its step the generation."""
        values = [self._summary.Value(tag=k, simple_value=v) for k, v in metrics.items()]
        self._write(gen, values)

    def figures(self, gen: int, images: Mapping[str, bytes], folder: Path) -> None:
        """One event of images, ``figures/<id>``."""
        values = []
        for key, png in images.items():
            width, height = _png_size(png)
            image = self._summary.Image(
                height=height, width=width, colorspace=4, encoded_image_string=png
            )
            values.append(self._summary.Value(tag=f"figures/{key}", image=image))
        self._write(gen, values)

    def close(self, status: str) -> None:
        """Flush and close the event file."""
        self._writer.close()

    def abandon(self) -> None:
        """Close the event file, if it was opened."""
        writer = getattr(self, "_writer", None)
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
