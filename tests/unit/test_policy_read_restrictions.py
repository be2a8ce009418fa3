"""Ranger row filters and masks stated as the Iceberg REST spec's ``read-restrictions``
(gateway/policy/row_filter_expression.py, mask_actions.py, read_restrictions.py): each supported
filter form gives the expected ``Predicate`` JSON, valid against the vendored spec; each mask
type and column type gives its action or fails closed naming the policy, the column and the
type; the whole object as a load would carry it. The rows these keep and the values they give
are checked against SQL's own evaluation in tests/unit/test_client_iceberg_read.py."""

from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType, BooleanType, DateType, DecimalType, DoubleType, FloatType, IntegerType, ListType, LongType,
    NestedField, StringType, StructType, TimestampType, TimestamptzType, TimeType, UUIDType,
)

from gateway.policy.hive_sql import Unstatable
from gateway.policy.mask_actions import ACTION_TYPES, column_projection, denied_projection
from gateway.policy.model import HIVE_MASK_TYPES
from gateway.policy.read_restrictions import read_restrictions
from gateway.policy.restrictions import ColumnMask, TableRestrictions
from gateway.policy.row_filter_expression import required_row_filter
from tests.support.iceberg.spec import check_read_restrictions

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "location", StringType()),
    NestedField(3, "ssn", StringType()),
    NestedField(4, "dob", DateType()),
    NestedField(5, "n", IntegerType()),
    NestedField(6, "ts", TimestampType()),
    NestedField(7, "amount", DecimalType(10, 2)),
    NestedField(8, "active", BooleanType()),
    NestedField(9, "ratio", FloatType()),
    NestedField(10, "score", DoubleType()),
    NestedField(11, "code", StringType(), required=True),
    NestedField(12, "tags", ListType(13, StringType())),
    NestedField(14, "Region", StringType()),
)


def ref(i):
    return {"type": "reference", "id": i}


def lit(v):
    return {"type": "literal", "value": v}


def cmp(kind, i, v):
    return {"type": kind, "left": ref(i), "right": lit(v)}


def not_null(i):
    return {"type": "not-null", "child": ref(i)}


def and_(a, b):
    return {"type": "and", "left": a, "right": b}


def or_(a, b):
    return {"type": "or", "left": a, "right": b}


# --- row filters ------------------------------------------------------------------------------


@pytest.mark.parametrize("sql, expected", [
    # Ranger's own cases (test_policyengine_hive_mask_filter.json): a column equal to a string
    ("location='US'", and_(not_null(2), cmp("eq", 2, "US"))),
    ("location <> 'US'", and_(not_null(2), cmp("not-eq", 2, "US"))),
    ("location != 'US'", and_(not_null(2), cmp("not-eq", 2, "US"))),
    ("n < 5", and_(not_null(5), cmp("lt", 5, 5))),
    ("n <= 5", and_(not_null(5), cmp("lt-eq", 5, 5))),
    ("n > -5", and_(not_null(5), cmp("gt", 5, -5))),
    ("n >= 5", and_(not_null(5), cmp("gt-eq", 5, 5))),
    ("5 < n", and_(not_null(5), cmp("gt", 5, 5))),  # a literal on the left: the sides swapped
    ("id = 7", cmp("eq", 1, 7)),  # a required column is never null: no guard
    ("id = 7L", cmp("eq", 1, 7)),  # Hive's BIGINT literal
    ("id = '7'", cmp("eq", 1, 7)),  # Hive compares the string as a number
    ("LOCATION = 'US'", and_(not_null(2), cmp("eq", 2, "US"))),  # Hive's names ignore case
    ("region = 'EU'", and_(not_null(14), cmp("eq", 14, "EU"))),
    ("`location` = 'US'", and_(not_null(2), cmp("eq", 2, "US"))),
    ("dob >= '2024-01-01'", and_(not_null(4), cmp("gt-eq", 4, "2024-01-01"))),
    ("dob = DATE '2024-01-01'", and_(not_null(4), cmp("eq", 4, "2024-01-01"))),
    ("dob = CAST('2024-01-01' AS DATE)", and_(not_null(4), cmp("eq", 4, "2024-01-01"))),
    ("ts < '2024-01-01 10:00:00'", and_(not_null(6), cmp("lt", 6, "2024-01-01T10:00:00"))),
    ("ts < TIMESTAMP '2024-01-01 10:00:00.5'", and_(not_null(6), cmp("lt", 6, "2024-01-01T10:00:00.500000"))),
    ("amount > 1.5", and_(not_null(7), cmp("gt", 7, "1.50"))),
    ("amount > '1.25'", and_(not_null(7), cmp("gt", 7, "1.25"))),
    ("ratio = 0.5", and_(not_null(9), cmp("eq", 9, 0.5))),
    ("score < 0.1", and_(not_null(10), cmp("lt", 10, 0.1))),
    ("active", and_(not_null(8), cmp("eq", 8, True))),
    ("active = false", and_(not_null(8), cmp("eq", 8, False))),
    # IN, IS [NOT] NULL, BETWEEN
    ("location IN ('US', 'CA', 'US')", and_(not_null(2), {"type": "in", "child": ref(2),
                                                          "values": [lit("US"), lit("CA")]})),
    ("location IN ('US', NULL)", and_(not_null(2), {"type": "in", "child": ref(2), "values": [lit("US")]})),
    ("location NOT IN ('US', 'CA')", and_(not_null(2), {"type": "not-in", "child": ref(2),
                                                         "values": [lit("US"), lit("CA")]})),
    ("location NOT IN ('US', NULL)", False),  # never TRUE in SQL
    ("location IS NULL", {"type": "is-null", "child": ref(2)}),
    ("location IS NOT NULL", not_null(2)),
    ("id IS NULL", False),
    ("id IS NOT NULL", True),
    ("n BETWEEN 1 AND 5", and_(and_(not_null(5), cmp("gt-eq", 5, 1)), and_(not_null(5), cmp("lt-eq", 5, 5)))),
    ("n NOT BETWEEN 1 AND 5", or_(and_(not_null(5), cmp("lt", 5, 1)), and_(not_null(5), cmp("gt", 5, 5)))),
    ("id BETWEEN 1 AND 5", and_(cmp("gt-eq", 1, 1), cmp("lt-eq", 1, 5))),
    # LIKE 'prefix%' as starts-with, LIKE without wildcards as eq
    ("location LIKE 'U%'", and_(not_null(2), cmp("starts-with", 2, "U"))),
    ("location LIKE 'U%%'", and_(not_null(2), cmp("starts-with", 2, "U"))),
    ("location NOT LIKE 'U%'", and_(not_null(2), cmp("not-starts-with", 2, "U"))),
    ("location LIKE 'a\\\\%b%'", and_(not_null(2), cmp("starts-with", 2, "a%b"))),  # \% is a percent sign
    ("location LIKE 'US'", and_(not_null(2), cmp("eq", 2, "US"))),
    ("location LIKE '%'", not_null(2)),
    ("location NOT LIKE '%'", False),
    # AND, OR, NOT: NOT states the rows where its operand is FALSE, not where it is not TRUE
    ("location = 'US' AND n > 1", and_(and_(not_null(2), cmp("eq", 2, "US")), and_(not_null(5), cmp("gt", 5, 1)))),
    ("location = 'US' OR n > 1", or_(and_(not_null(2), cmp("eq", 2, "US")), and_(not_null(5), cmp("gt", 5, 1)))),
    ("NOT location = 'US'", and_(not_null(2), cmp("not-eq", 2, "US"))),
    ("NOT (location = 'US' OR n > 1)", and_(and_(not_null(2), cmp("not-eq", 2, "US")),
                                             and_(not_null(5), cmp("lt-eq", 5, 1)))),
    ("NOT (location = 'US' AND n > 1)", or_(and_(not_null(2), cmp("not-eq", 2, "US")),
                                             and_(not_null(5), cmp("lt-eq", 5, 1)))),
    ("NOT NOT location IS NULL", {"type": "is-null", "child": ref(2)}),
    ("NOT location IS NULL", not_null(2)),
    ("(location = 'US')", and_(not_null(2), cmp("eq", 2, "US"))),
    # constants and comparisons with NULL (NULL in every row: never TRUE, never FALSE)
    ("TRUE", True),
    ("FALSE", False),
    ("NULL", False),
    ("NOT NULL", False),
    ("location = NULL", False),
    ("NOT location = NULL", False),
    ("TRUE AND location IS NULL", {"type": "is-null", "child": ref(2)}),
    ("FALSE OR location IS NULL", {"type": "is-null", "child": ref(2)}),
    ("", True),  # Ranger's empty filter filters nothing
    ("   ", True),
])
def test_each_supported_filter_form(sql, expected):
    got = required_row_filter(sql, 7, SCHEMA)
    assert got == expected
    if got is not True:
        check_read_restrictions({"required-row-filter": got})


@pytest.mark.parametrize("sql, part, words", [
    ("upper(location) = 'US'", "UPPER(location)", "a function"),
    ("location = concat('U', 'S')", "CONCAT('U', 'S')", "a function"),
    ("location = current_user()", "CURRENT_USER()", "current_user()"),
    ("current_user() = 'bob'", "CURRENT_USER()", "current_user()"),
    ("location IN (SELECT c FROM t)", "location IN (SELECT c FROM t)", "subquery"),
    ("EXISTS (SELECT 1 FROM t)", "EXISTS(SELECT 1 FROM t)", "subquery"),
    ("nosuch = 1", "nosuch", "no such column"),
    ("t.location = 'US'", "t.location", "not a column of the table"),
    ("location = ssn", "location = ssn", "two columns"),
    ("1 = 1", "1 = 1", "names no column"),
    ("location LIKE 'U_'", "location LIKE 'U_'", "LIKE pattern"),
    ("location LIKE '%US'", "location LIKE '%US'", "LIKE pattern"),
    ("n LIKE '5%'", "n LIKE '5%'", "LIKE on a int column"),
    ("location RLIKE 'U.*'", "location RLIKE 'U.*'", "a function"),
    ("location <=> 'US'", "location IS NOT DISTINCT FROM 'US'", "not a comparison"),
    ("location = 5", "5", "does not compare with location"),
    ("dob = 5", "5", "does not compare with dob"),
    ("active = 1", "1", "does not compare with active"),
    ("n = 1.5", "1.5", "not a whole number"),
    ("n = '1.5'", "'1.5'", "not a whole number"),
    ("n = 99999999999", "99999999999", "outside the range"),
    ("ratio = 0.1", "0.1", "not exactly a float"),
    ("amount = 1.505", "1.505", "more than 2 decimal places"),
    ("amount = 'x'", "'x'", "not a number"),
    ("dob = 'yesterday'", "'yesterday'", "not a value of dob's type"),
    ("ts = '2024-01-01T10:00:00+02:00'", "'2024-01-01T10:00:00+02:00'", "zone offset"),
    ("dob = CAST('2024-01-01' AS TIMESTAMP)", "CAST('2024-01-01' AS TIMESTAMP)", "a cast to TIMESTAMP"),
    ("location = 'US' AND", "location = 'US' AND", "not Hive SQL that parses"),
    ("location = 'US'; DROP TABLE t", "location = 'US'; DROP TABLE t", "not one Hive SQL expression"),
    ("location IS TRUE", "location IS TRUE", "IS compares with NULL only"),
    ("code", "code", "a string column is no condition"),
])
def test_what_cannot_be_stated_fails_closed_naming_policy_and_part(sql, part, words):
    with pytest.raises(Unstatable) as err:
        required_row_filter(sql, 42, SCHEMA)
    assert err.value.policy_id == 42 and err.value.part == part
    assert words in err.value.reason, err.value.reason
    assert str(err.value).startswith("policy 42: ")


def test_a_filter_on_a_column_named_twice_in_any_case_is_refused():
    schema = Schema(NestedField(1, "a", StringType()), NestedField(2, "A", StringType()))
    with pytest.raises(Unstatable, match="several columns"):
        required_row_filter("a = 'x'", 3, schema)


# --- masks ------------------------------------------------------------------------------------

COLUMNS = {
    "string": NestedField(20, "c", StringType()),
    "int": NestedField(20, "c", IntegerType()),
    "long": NestedField(20, "c", LongType()),
    "date": NestedField(20, "c", DateType()),
    "timestamp": NestedField(20, "c", TimestampType()),
    "decimal": NestedField(20, "c", DecimalType(9, 2)),
    "binary": NestedField(20, "c", BinaryType()),
}


def ranger_mask(mask_type: str, column: str = "c", policy_id: int = 9) -> ColumnMask:
    transformer = HIVE_MASK_TYPES[mask_type].transformer
    expression = "NULL" if mask_type == "MASK_NULL" else transformer.replace("{col}", column)
    return ColumnMask(mask_type, expression, policy_id)


#: Each Ranger Hive mask type against each column type: the spec's action, or None when none
#: means what Hive does on that type.
MAPPING = {
    "MASK_NULL": dict.fromkeys(COLUMNS, "replace-with-null"),
    "MASK_SHOW_LAST_4": {"string": "show-last-4"},
    "MASK_SHOW_FIRST_4": {"string": "show-first-4"},
    "MASK_HASH": {"string": "sha-256-global"},
    "MASK_DATE_SHOW_YEAR": {"date": "truncate-to-year"},
    "MASK": {},
}


@pytest.mark.parametrize("mask_type", MAPPING)
@pytest.mark.parametrize("column_type", COLUMNS)
def test_each_ranger_mask_type_on_each_column_type(mask_type, column_type):
    field = COLUMNS[column_type]
    action = MAPPING[mask_type].get(column_type)
    if action is None:
        with pytest.raises(Unstatable) as err:
            column_projection(ranger_mask(mask_type), field)
        assert err.value.policy_id == 9
        assert err.value.part == f"{mask_type} on c ({field.field_type})"  # the policy, the column, its type
    else:
        projection = column_projection(ranger_mask(mask_type), field)
        assert projection == {"field-id": 20, "action": action}
        assert isinstance(field.field_type, ACTION_TYPES[action])
        check_read_restrictions({"required-column-projections": [projection]})


def test_mask_is_not_mask_alphanum_whose_definition_differs():
    with pytest.raises(Unstatable, match="no action of the Iceberg REST spec means what this expression does"):
        column_projection(ranger_mask("MASK"), COLUMNS["string"])


def test_a_mask_on_a_required_column_cannot_be_null():
    required = NestedField(20, "c", StringType(), required=True)
    with pytest.raises(Unstatable, match="optional columns only"):
        column_projection(ranger_mask("MASK_NULL"), required)
    assert column_projection(ranger_mask("MASK_HASH"), required) == {"field-id": 20, "action": "sha-256-global"}


def test_a_mask_type_without_an_expression_fails_closed():
    with pytest.raises(Unstatable, match="no Hive expression"):
        column_projection(ColumnMask("MASK_SITE_OWN", None, 9), COLUMNS["string"])


@pytest.mark.parametrize("value_expr, column_type, action", [
    ("NULL", "int", "replace-with-null"),
    ("{col}", "string", None),  # the column itself: no action
    ("`C`", "string", None),
    ("mask_hash({col})", "string", "sha-256-global"),  # a CUSTOM writing a transformer out
    ("MASK_HASH( {col} )", "string", "sha-256-global"),
    ("mask_show_last_n({col}, 4, 'x', 'x', 'x', -1, '1')", "string", "show-last-4"),
    ("mask({col}, 'x', 'x', 'x', -1, '1', 1, 0, -1)", "date", "truncate-to-year"),
    ("'XXXXXXXX'", "string", "mask-to-fixed-value"),  # the spec's fixed value of the type
    ("0", "int", "mask-to-fixed-value"),
    ("0L", "long", "mask-to-fixed-value"),
    ("0.00", "decimal", "mask-to-fixed-value"),
    ("DATE '1970-01-01'", "date", "mask-to-fixed-value"),
    ("CAST('1970-01-01 00:00:00' AS TIMESTAMP)", "timestamp", "mask-to-fixed-value"),
])
def test_a_custom_mask_maps_where_its_expression_means_an_action(value_expr, column_type, action):
    mask = ColumnMask("CUSTOM", value_expr.replace("{col}", "c"), 13)
    projection = column_projection(mask, COLUMNS[column_type])
    assert projection == (None if action is None else {"field-id": 20, "action": action})


@pytest.mark.parametrize("value_expr, column_type", [
    ("'XXXX'", "string"),  # a constant, but not the spec's fixed value
    ("1", "int"),
    ("DATE '2000-01-01'", "date"),
    ("upper({col})", "string"),
    ("concat(substr({col}, 1, 2), 'xx')", "string"),
    ("mask_show_last_n({col}, 4, 'X', 'x', 'n', -1, '1')", "string"),  # other mask characters
    ("mask_show_last_n({col}, 2, 'x', 'x', 'x', -1, '1')", "string"),  # other count
    ("CASE WHEN current_user() = 'bob' THEN {col} END", "string"),
    ("mask_hash({col})", "int"),  # Hive gives NULL for a number, the spec a hash
    ("'XXXXXXXX'", "int"),
])
def test_a_custom_mask_without_an_action_of_the_same_meaning_fails_closed(value_expr, column_type):
    with pytest.raises(Unstatable) as err:
        column_projection(ColumnMask("CUSTOM", value_expr.replace("{col}", "c"), 13), COLUMNS[column_type])
    assert err.value.policy_id == 13 and "CUSTOM on c" in err.value.part


def test_mask_to_fixed_value_only_for_types_that_have_one():
    struct = NestedField(20, "c", StructType(NestedField(21, "a", IntegerType()), NestedField(22, "t", TimeType())))
    assert isinstance(struct.field_type, ACTION_TYPES["mask-to-fixed-value"])
    uuid_column = NestedField(20, "c", UUIDType())
    projection = column_projection(ColumnMask("CUSTOM", "'00000000-0000-0000-0000-000000000000'", 13), uuid_column)
    assert projection == {"field-id": 20, "action": "mask-to-fixed-value"}
    with pytest.raises(Unstatable, match="no action"):  # -0.0 is not the spec's 0.0
        column_projection(ColumnMask("CUSTOM", "-0.0", 13), NestedField(20, "c", DoubleType()))
    assert column_projection(ColumnMask("CUSTOM", "0.0", 13), NestedField(20, "c", DoubleType())) == \
        {"field-id": 20, "action": "mask-to-fixed-value"}
    assert column_projection(ColumnMask("CUSTOM", "FALSE", 13), NestedField(20, "c", BooleanType())) == \
        {"field-id": 20, "action": "mask-to-fixed-value"}
    assert column_projection(ColumnMask("CUSTOM", "'1970-01-01T00:00:00+00:00'", 13),
                             NestedField(20, "c", TimestamptzType())) == {"field-id": 20, "action": "mask-to-fixed-value"}
    with pytest.raises(Unstatable):  # a list's fixed value is [], which no Hive literal writes
        column_projection(ColumnMask("CUSTOM", "'XXXXXXXX'", 13), NestedField(20, "c", ListType(21, IntegerType())))


def test_a_denied_column_is_replaced_with_null_unless_required():
    assert denied_projection(NestedField(3, "ssn", StringType())) == {"field-id": 3, "action": "replace-with-null"}
    with pytest.raises(Unstatable) as err:
        denied_projection(NestedField(11, "code", StringType(), required=True))
    assert err.value.policy_id is None and err.value.part == "code"
    assert str(err.value).startswith("a denied column: 'code'")


# --- the whole object -------------------------------------------------------------------------


def test_read_restrictions_as_a_load_carries_them():
    found = TableRestrictions("location = 'US'", 201, {
        "ssn": ranger_mask("MASK_SHOW_LAST_4", "ssn", 101),
        "DOB": ranger_mask("MASK_DATE_SHOW_YEAR", "DOB", 102),
        "location": ranger_mask("MASK_HASH", "location", 103),
        "gone": ranger_mask("MASK_NULL", "gone", 104),  # a column the current schema lacks
    })
    got = read_restrictions(found, SCHEMA, denied=["Location", "n"])
    assert got == {
        "required-row-filter": and_(not_null(2), cmp("eq", 2, "US")),
        "required-column-projections": [
            {"field-id": 2, "action": "replace-with-null"},  # denied wins over its mask
            {"field-id": 3, "action": "show-last-4"},
            {"field-id": 4, "action": "truncate-to-year"},
            {"field-id": 5, "action": "replace-with-null"},
        ],
    }
    check_read_restrictions(got)


def test_a_filter_a_mask_and_a_denied_column_stated_together():
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType()),
                    NestedField(3, "ssn", StringType()), NestedField(4, "location", StringType()),
                    NestedField(5, "salary", DoubleType()))
    found = TableRestrictions("location = 'US'", 201, {"ssn": ranger_mask("MASK_SHOW_LAST_4", "ssn", 101)})
    assert read_restrictions(found, schema, denied=["salary"]) == {
        "required-row-filter": {
            "type": "and",
            "left": {"type": "not-null", "child": {"type": "reference", "id": 4}},
            "right": {"type": "eq", "left": {"type": "reference", "id": 4},
                      "right": {"type": "literal", "value": "US"}},
        },
        "required-column-projections": [
            {"field-id": 3, "action": "show-last-4"},
            {"field-id": 5, "action": "replace-with-null"},
        ],
    }


def test_no_restriction_gives_none_and_an_empty_filter_states_nothing():
    assert read_restrictions(TableRestrictions(), SCHEMA) is None
    assert read_restrictions(TableRestrictions("", 5), SCHEMA) is None
    assert read_restrictions(TableRestrictions(None, -1, {"ssn": ColumnMask("CUSTOM", "ssn", 6)}), SCHEMA) is None
    assert read_restrictions(TableRestrictions("FALSE", 5), SCHEMA) == {"required-row-filter": False}


def test_any_part_that_cannot_be_stated_fails_the_whole():
    with pytest.raises(Unstatable, match="policy 5"):
        read_restrictions(TableRestrictions("upper(location) = 'US'", 5), SCHEMA)
    with pytest.raises(Unstatable, match="policy 6"):
        read_restrictions(TableRestrictions(None, -1, {"ssn": ranger_mask("MASK", "ssn", 6)}), SCHEMA)
    with pytest.raises(Unstatable, match="a denied column: 'code'"):
        read_restrictions(TableRestrictions(), SCHEMA, denied=["code"])
    with pytest.raises(Unstatable, match="named by exclusion"):
        read_restrictions(TableRestrictions(complete=False), SCHEMA)
