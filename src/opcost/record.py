"""Keeps what was measured: the store and the --json file, updated after every
probe process so that an interruption or a later failure loses nothing."""

from __future__ import annotations

from . import __version__
from .export import json_result


class Recorder:
    def __init__(self, *, store, json_path: str | None, env: dict, argv: list[str], label: str | None,
                 kind: str = "run"):
        self.store = store
        self.json_path = json_path
        self.env = env
        self.argv = argv
        self.label = label
        self.kind = kind
        self.run_id: int | None = None
        self.result_ids: dict[int, int] = {}
        self.results = []
        self.status = "running"

    def start(self, results) -> None:
        self.results = results
        if self.store:
            self.run_id = self.store.create_run(label=self.label, env=self.env, argv=self.argv,
                                                opcost_version=__version__, kind=self.kind)
            for pos, vr in enumerate(results):
                v = vr.variant
                self.result_ids[id(vr)] = self.store.add_result(
                    self.run_id, position=pos, bench=v.bench, params=v.all_params(), op=vr.op, unit="ns",
                    key=v.key())
        self._write_json()

    def process_done(self, vr, proc: dict) -> None:
        if self.store:
            self.store.add_process(self.result_ids[id(vr)], idx=proc["index"], header=proc["header"],
                                   samples=proc["warmup"] + proc["samples"], trailer=proc["trailer"],
                                   meta={k: proc[k] for k in ("round", "seq", "pad_bytes", "wall_s")})
        self._write_json()

    def variant_updated(self, vr) -> None:
        if self.store:
            self.store.set_result(self.result_ids[id(vr)], status=vr.status, reason=vr.reason,
                                  summary=vr.summary)
        self._write_json()

    def finish(self, status: str) -> None:
        self.status = status
        if self.store:
            self.store.finish_run(self.run_id, status)
        self._write_json()

    def document(self) -> dict:
        return json_result.build(env=self.env, results=[vr.to_json() for vr in self.results],
                                 version=__version__, run_id=self.run_id, label=self.label,
                                 status=self.status, argv=self.argv)

    def _write_json(self) -> None:
        if self.json_path:
            json_result.write_atomic(self.json_path, json_result.serialize(self.document()))
