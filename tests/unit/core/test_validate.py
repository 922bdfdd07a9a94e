"""The shared checks of the settings parsers: an unknown key or a bad number is refused with the same message
wherever it is read."""
import math

import pytest

from dse.core.errors import DseError
from dse.core.validate import bounded_int, check_keys, positive_float


def test_check_keys_names_the_first_unknown_key_in_sorted_order_and_the_valid_ones():
    check_keys({"a": 1, "b": 2}, ("a", "b", "c"), "setting")
    check_keys({}, (), "setting")
    with pytest.raises(DseError, match=r"^unknown setting 'x'; valid choices: a, b$"):
        check_keys({"z": 0, "a": 1, "x": 2}, ("b", "a"), "setting")
    with pytest.raises(DseError, match=r"^unknown key of p '7'; valid choices: a$"):    # a YAML key read as a number
        check_keys({7: 0}, ["a"], "key of p")
    check_keys({1: 0}, ["1"], "key")


def test_bounded_int_refuses_bools_floats_and_values_out_of_range():
    assert bounded_int(5, "n", 1, 10) == 5
    for bad in (True, 2.0, "3", 0, 11_000):
        with pytest.raises(DseError, match=rf"^n must be an integer in 1..10,000, got {bad!r}$"):
            bounded_int(bad, "n", 1, 10_000)


class OwnError(DseError):
    pass


def test_positive_float_refuses_what_is_no_finite_number_above_zero():
    assert positive_float("2.5", "frame") == 2.5
    with pytest.raises(DseError, match=r"^frame must be a number > 0, got 'ten'$"):
        positive_float("ten", "frame")
    for bad in (0, -1.0, math.inf, math.nan, None):
        with pytest.raises(OwnError, match="frame must be"):
            positive_float(bad, "frame", OwnError)
