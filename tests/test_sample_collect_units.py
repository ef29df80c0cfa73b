"""Pure parts of the sample collect host: assembly files, tiering rules, truncated records."""
from __future__ import annotations

import pytest
import sample_support  # noqa: F401  (puts the repository on sys.path)

from sample import assembly, mchfile
from sample.assembly import MethodSpec, runtime_settings, tiers_when_run

pytestmark = pytest.mark.pure  # no child process (tests/conftest.py)


def test_assembly_files_round_trip_and_reject_other_files():
    for spec in assembly.sample_assemblies().values():
        assert assembly.decode_assembly(assembly.encode_assembly(spec)) == spec
    for data in (b"", b"MZ\x90\x00 native", assembly.ASSEMBLY_MAGIC + b"{not json\n",
                 assembly.ASSEMBLY_MAGIC + b'{"name": "x", "kind": "driver"}\n'):
        with pytest.raises(assembly.NotAnAssembly):
            assembly.decode_assembly(data)


def test_runtime_settings_defaults_and_prefixes():
    default = runtime_settings({})
    assert default.tiered_compilation and not default.tiered_pgo and default.ready_to_run
    assert not default.extra_superpmi_queries and dict(default.jit_config) == {}
    legacy = runtime_settings({"COMPlus_TieredCompilation": "0", "COMPlus_JitNoCSE": "1"})
    assert not legacy.tiered_compilation and dict(legacy.jit_config) == {"JitNoCSE": "1"}
    both = runtime_settings({"DOTNET_TieredCompilation": "1", "COMPlus_TieredCompilation": "0"})
    assert both.tiered_compilation  # DOTNET_ wins
    assert not runtime_settings({"DOTNET_TieredCompilation": "0", "DOTNET_TieredPGO": "1"}).tiered_pgo
    assert runtime_settings({"DOTNET_JitOptRepeat": "*", "DOTNET_JitStdOutFile": "x"}).jit_config == {
        "JitOptRepeat": "*"}


@pytest.mark.parametrize("method, env, tiers", [
    (MethodSpec("a", 10), {"DOTNET_TieredCompilation": "0"}, ["FullOpts"]),
    (MethodSpec("a", 10, calls=0), {"DOTNET_TieredCompilation": "0"}, []),
    (MethodSpec("a", 10, r2r=True, calls=99), {"DOTNET_TieredCompilation": "0"}, []),
    (MethodSpec("a", 10, r2r=True), {"DOTNET_TieredCompilation": "0", "DOTNET_ReadyToRun": "0"}, ["FullOpts"]),
    (MethodSpec("a", 10), {}, ["Tier0"]),
    (MethodSpec("a", 10, calls=30), {}, ["Tier0", "Tier1"]),
    (MethodSpec("a", 10, calls=29), {}, ["Tier0"]),
    (MethodSpec("a", 10, loops=1, hot_loop=True), {}, ["Tier0", "Tier1-OSR"]),
    (MethodSpec("a", 10, r2r=True, calls=30), {}, ["Tier1"]),
    (MethodSpec("a", 10, r2r=True, calls=2), {}, []),
    (MethodSpec("a", 10, calls=30), {"DOTNET_TieredPGO": "1"}, ["Tier0", "Instrumented Tier0", "Tier1"]),
    (MethodSpec("a", 10, loops=1, calls=30), {"DOTNET_TieredPGO": "1"}, ["Instrumented Tier0", "Tier1"]),
    (MethodSpec("a", 10, r2r=True, calls=30), {"DOTNET_TieredPGO": "1"}, ["Instrumented Tier1", "Tier1"]),
])
def test_tiering_rules(method, env, tiers):
    assert tiers_when_run(method, runtime_settings(env)) == tiers


def test_pmi_plan_compiles_unused_methods_and_needs_references():
    apps = assembly.sample_assemblies()
    pmi, library = apps["pmi/pmi.dll"], apps["apps/library.dll"]
    settings = runtime_settings({"DOTNET_TieredCompilation": "0"})
    without = assembly.plan_pmi(pmi, library, settings)
    with_deps = assembly.plan_pmi(pmi, library, settings, ["deps"])
    assert [c.assembly for c in without] == ["pmi"] * 3 + ["library"] * 3
    assert len(with_deps) == 3 + 5 and all(c.tier == "FullOpts" for c in with_deps)
    hello = assembly.plan_prepare_all(apps["apps/hello.dll"], settings)
    assert "Hello.Program:Unused(int):int" in [c.method.name for c in hello]


def test_truncated_tail_detection():
    records = mchfile.encode_record(b"abc") + mchfile.encode_record(b"defgh")
    assert mchfile.scan_complete_records(records) == (list(mchfile.scan_records(records)), None)
    last = mchfile.encode_record(b"0123456789")
    for cut in range(1, len(last)):
        refs, at = mchfile.scan_complete_records(records + last[:cut])
        assert len(refs) == 2 and at == len(records), cut
    for damaged in (records + b"xx", records + b"mx", b"nc" + records):
        with pytest.raises(mchfile.FramingError):
            mchfile.scan_complete_records(damaged)
