"""`opcost env` names each CPU's core type so a user can pick one (seed 004:
a Cortex-A15 against a Cortex-A7 of the same big.LITTLE chip)."""

from __future__ import annotations

from opcost import env as envmod


def _arm_block(cpu: int, part: str) -> dict[str, str]:
    return {"processor": str(cpu), "CPU implementer": "0x41", "CPU architecture": "7", "CPU variant": "0x0",
            "CPU part": part, "CPU revision": "3"}


def test_big_little_cores_are_named_and_grouped(monkeypatch):
    blocks = [_arm_block(0, "0xc0f"), _arm_block(1, "0xc0f"), _arm_block(2, "0xc07"), _arm_block(3, "0xc07"),
              _arm_block(4, "0xc07")]
    caps = {0: "1024", 1: "1024", 2: "430", 3: "430", 4: "430"}

    def fake_read(path):
        p = str(path)
        if p.endswith("cpu_capacity"):
            return caps[int(p.split("/")[-2].removeprefix("cpu"))], None
        return None, "absent"

    monkeypatch.setattr(envmod, "_read", fake_read)
    per_cpu = envmod._per_cpu(blocks, None)["value"]
    assert [e["model"] for e in per_cpu] == ["Cortex-A15"] * 2 + ["Cortex-A7"] * 3
    assert per_cpu[0]["part"] == "0xc0f" and per_cpu[2]["capacity"] == 430
    types = envmod.core_types(per_cpu)
    assert types == [{"model": "Cortex-A15", "capacity": 1024, "cpus": "0-1", "count": 2},
                     {"model": "Cortex-A7", "capacity": 430, "cpus": "2-4", "count": 3}]


def test_unknown_arm_part_is_shown_as_hex():
    assert envmod._arm_core_name("0x51", "0x802") == "implementer 0x51 part 0x802"
    assert envmod._arm_core_name(None, None) is None


def test_this_machine_has_core_types():
    e = envmod.collect()
    types = e["core_types"]["value"]
    assert types and sum(t["count"] for t in types) == len(e["per_cpu"]["value"])
