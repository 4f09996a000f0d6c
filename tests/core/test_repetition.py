"""Looping output is found with its span; varied text is not."""

from __future__ import annotations

from doctor.core.repetition import find_loop


def test_a_loop_running_to_the_end_is_reported_by_its_period() -> None:
    loop = find_loop("Sure! " + "I'm going to eat apples. " * 17)
    assert loop is not None and loop.span == "I'm going to eat apples." and loop.count == 17
    assert loop.share > 0.9


def test_a_loop_the_model_escaped_from() -> None:
    text = ("Intro text here. " + "Step one: mix it all. Step two: bake it now. " * 5
            + "Then we stopped and wrote a long and varied conclusion about nothing in particular at all.")
    loop = find_loop(text)
    assert loop is not None and loop.span == "Step one: mix it all. Step two: bake it now." and loop.count == 5


def test_a_cut_last_copy_and_a_stray_token_do_not_hide_it() -> None:
    text = "The robot paints. " + "The sea is blue and deep. " * 30 + "The sea is"
    loop = find_loop(text)
    assert loop is not None and loop.span == "The sea is blue and deep." and loop.count >= 30


def test_single_word_stutter_and_cjk() -> None:
    assert find_loop("the " * 20).span == "the"
    assert find_loop("好的。" * 10) is not None


def test_varied_text_is_not_a_loop() -> None:
    text = ("The solar system has eight planets. Mercury is closest to the Sun, then Venus, Earth and Mars. "
            "Jupiter and Saturn are gas giants; Uranus and Neptune are ice giants. Pluto is a dwarf planet.")
    assert find_loop(text) is None
    assert find_loop("too short") is None
