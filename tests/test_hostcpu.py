"""fusekit.hostcpu: builds keep ggml's CPU backend off AMX where the CPU advertises it (session 36's machine faulted
on its first AMX tile instruction, and every CPU eval of SmolLM2 died)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusekit import hostcpu
from fusekit.build import BuildOptions


@pytest.fixture(autouse=True)
def _fresh_cache():
    hostcpu.isa_defines.cache_clear()
    yield
    hostcpu.isa_defines.cache_clear()


def test_cpu_flags_reads_the_first_cpus_flags(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_tile\n\nprocessor\t: 1\nflags\t\t: other\n")
    assert hostcpu.cpu_flags(info) == {"fpu", "avx2", "amx_tile"}
    assert hostcpu.cpu_flags(tmp_path / "missing") == set()


@pytest.mark.parametrize("flags", [{"avx512f", "amx_tile", "amx_int8"}, {"avx512f", "avx2"}], ids=["amx", "no-amx"])
def test_amx_is_off_exactly_where_the_cpu_advertises_it(monkeypatch: pytest.MonkeyPatch, flags: set[str]) -> None:
    monkeypatch.setattr(hostcpu.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(hostcpu, "cpu_flags", lambda: flags)
    monkeypatch.setattr(hostcpu, "compiler_accepts", lambda *_: True)
    defines = BuildOptions().cmake_defines("abc", None)
    amx_off = [d for d in defines if "-mno-amx-tile" in d]
    if "amx_tile" in flags:
        assert amx_off == [f"CMAKE_C_FLAGS={hostcpu.AMX_OFF}", f"CMAKE_CXX_FLAGS={hostcpu.AMX_OFF}"]
    else:
        assert amx_off == []


def test_no_amx_flags_for_a_compiler_that_does_not_know_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostcpu.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(hostcpu, "cpu_flags", lambda: {"amx_tile"})
    assert hostcpu.compiler_accepts("-mno-such-flag-at-all", "c++") is False
    monkeypatch.setattr(hostcpu, "compiler_accepts", lambda *_: False)
    assert hostcpu.isa_defines() == ()


def test_this_compiler_takes_the_amx_flags() -> None:
    """The flags are GCC's and Clang's since 2020; where the toolchain is older the probe above leaves them out."""
    assert hostcpu.compiler_accepts(hostcpu.AMX_OFF, "c++")
