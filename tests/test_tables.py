from segrl.tables import format_table


def test_format_table():
    text = format_table([{"name": "bpe", "f1": 0.25}, {"name": "morfessor"}], ["name", "f1"])
    lines = text.splitlines()
    assert lines[0].split() == ["name", "f1"]
    assert lines[2].split() == ["bpe", "0.250"]
    assert lines[3].split() == ["morfessor", "-"]
