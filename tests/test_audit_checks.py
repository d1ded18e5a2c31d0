"""Round 5 of the audit's general checks: names that share a family name, legalise/ban, amounts in other
units of the same dimension, and a universal ("all", "always") the evidence does not state."""

from __future__ import annotations

from bosun.core.audit.audit import audit
from bosun.core.audit.config import AuditConfig
from bosun.core.audit.consistency import check, overclaim
from bosun.core.audit.match import clauses

LEX = AuditConfig(matcher="bm25")


def test_role_swap_between_names_that_share_a_word() -> None:
    ev = "Serena Williams defeated Venus Williams in the final of the 2003 Wimbledon Championships."
    swapped = "Venus Williams defeated Serena Williams in the final of the 2003 Wimbledon Championships."
    assert [m.kind for m in check(swapped, ev)] == ["role"]
    assert check(ev, ev) == []
    assert check("Venus Williams was defeated by Serena Williams in the final of the 2003 Wimbledon Championships.", ev) == []


def test_legalise_is_the_opposite_of_ban() -> None:
    ev = "In 2004 Ireland became the first country to ban smoking in all enclosed workplaces."
    found = check("In 2004 Ireland became the first country to legalise smoking in all enclosed workplaces.", ev)
    assert [m.kind for m in found] == ["negation"]
    assert check("In 2004 Ireland became the first country to prohibit smoking in all enclosed workplaces.", ev) == []


def test_amounts_are_compared_across_units_of_one_dimension() -> None:
    ev = "Global mean sea level rose by about 20 centimetres between 1901 and 2018."
    assert [m.kind for m in check("Global mean sea level rose by about 2 metres between 1901 and 2018.", ev)] == ["number"]
    assert check("Global mean sea level rose by about 0.2 metres between 1901 and 2018.", ev) == []
    # conversions are rounded: 5 miles is 8.05 km
    assert check("The marked trail through the park is 5 miles long.", "The marked trail through the park is 8 km long.") == []
    assert check("The trail through the park is more than 3 km long.", "The trail through the park is 5,000 metres long.") == []


def test_a_universal_the_evidence_does_not_state_is_an_overclaim() -> None:
    ev = "Muscle pain is the most commonly reported side effect of statins."
    assert overclaim("All patients taking statins report muscle pain.", ev) == "all"
    assert overclaim("Statins always cause muscle pain.", ev) == "always"
    assert overclaim("Muscle pain is the most commonly reported side effect of statins.", ev) is None
    assert overclaim("Ireland banned smoking in all enclosed workplaces.", "Ireland banned smoking in every enclosed workplace.") is None
    assert overclaim("It was the best-selling album of all time.", "It was the best-selling album ever.") is None
    assert overclaim("Not all patients report muscle pain.", ev) is None


def test_overclaim_makes_a_claim_partially_supported() -> None:
    chunks = [{"content": "Muscle pain is the most commonly reported side effect of statins."},
              {"content": "Statins lower LDL cholesterol."}]
    ok = audit("", chunks, "Muscle pain is the most commonly reported side effect of statins.", LEX)["claims"][0]
    assert ok["verdict"] == "supported"
    claim = audit("", chunks, "Muscle pain is always the most commonly reported side effect of statins.", LEX)["claims"][0]
    assert claim["verdict"] == "partially_supported" and not claim["supported"]
    assert "'always'" in claim["note"] and claim["features"]["overclaim"] == 1.0


def test_titles_and_negated_universals_are_not_overclaims() -> None:
    ev = "She spoke out in support of Michelle Williams, who was paid less than her co-star."
    assert overclaim('She supported Michelle Williams in the film "All the Money in the World".', ev) is None
    assert overclaim("Simulation models might not include all the environmental factors.", "Models are simplified.") is None


def test_a_quantifier_word_against_a_percentage_on_the_other_side_of_half() -> None:
    ev = "About 30 percent of the participants received the placebo."
    assert [m.kind for m in check("Most of the participants received the placebo.", ev)] == ["quantifier"]
    assert check("Most of the participants received the placebo.", ev.replace("30", "70")) == []
    assert check("Some of the participants received the placebo.", ev) == []
    assert [m.kind for m in check("A minority of voters chose to leave the European Union in the referendum.",
                                  "In the referendum, 51.9% of voters chose to leave the European Union.")] == ["quantifier"]


def test_defeated_is_the_winners_verb_and_born_is_not_died() -> None:
    ev = "Serena Williams defeated Venus Williams in the 2003 Wimbledon final."
    assert check("Serena Williams won the 2003 Wimbledon final against Venus Williams.", ev) == []
    assert [m.kind for m in check("The team lost the 2003 final.", "The team won the 2003 final.")] == ["negation"]
    assert [m.kind for m in check("Einstein was born in Ulm in 1879.", "Einstein died in Ulm in 1879.")] == ["negation"]
    assert check("Einstein was born in Ulm in 1879.",
                 "Einstein was born in Ulm, Germany, in 1879 and died in Princeton in 1955.") == []


def test_antonym_states_and_events_of_short_claims() -> None:
    assert [m.kind for m in check("Mount Etna is a dormant volcano on the east coast of Sicily.",
                                  "Mount Etna is an active volcano on the east coast of Sicily.")] == ["negation"]
    # two content words: the opposed word is left out of the alignment gate, so the check runs
    assert [m.kind for m in check("The bridge was demolished in 1967.", "The bridge was built in 1967.")] == ["negation"]
    assert check("The bridge was built in 1901 and demolished in 1967.",
                 "The bridge, built in 1901, was demolished in 1967.") == []
    assert [m.kind for m in check("The treaty was rejected by the Senate in 1919.",
                                  "The Senate ratified the treaty in 1919.")] == ["negation"]


def test_add_on_after_an_appositive_or_at_the_end_of_a_list_of_predicates() -> None:
    chunks = [{"content": "Aspirin is used to reduce fever and relieve mild to moderate pain."},
              {"content": "It was first synthesised by Felix Hoffmann at Bayer in 1897."}]
    assert [t for t, _ in clauses("Aspirin, first synthesised by Hoffmann in 1897, also cures the common cold.")][-1] \
        == "also cures the common cold."
    assert len(clauses("Aspirin reduces fever, relieves mild pain and reverses hair loss.")) == 2
    assert len(clauses("Salt and pepper are common seasonings.")) == 1
    for claim in ("Aspirin, first synthesised by Felix Hoffmann at Bayer in 1897, also cures the common cold.",
                  "Aspirin reduces fever, relieves mild pain and reverses hair loss."):
        assert audit("", chunks, claim, LEX)["claims"][0]["verdict"] == "partially_supported"
    assert audit("", chunks, "Aspirin reduces fever and relieves mild to moderate pain.", LEX)["claims"][0]["verdict"] \
        == "supported"


def test_the_same_month_in_another_year_is_a_date_mismatch() -> None:
    ev = "The Apollo 11 crew landed on the Moon in July 1969. The mission was announced in May 1961."
    found = check("The crew landed on the Moon in July 1961 after an announcement in May 1961.", ev)
    assert [m.kind for m in found] == ["date"] and "july 1961" in found[0].claim
    assert check("The crew landed on the Moon in July 1969, eight years after the May 1961 announcement.", ev) == []
    assert check("Apollo 11 landed on July 20, 1969.", "On July 20, 1969, Apollo 11 landed in the Sea of Tranquility.") == []


def test_a_converse_said_from_the_other_party_is_no_contradiction() -> None:
    ev = "Spain won the Euro 2024 final, beating England 2-1 in Berlin."
    assert check("England lost the Euro 2024 final to Spain 2-1 in Berlin.", ev) == []
    flipped = check("Spain lost the Euro 2024 final to England 2-1 in Berlin.", ev)
    assert [m.kind for m in flipped] == ["negation"]


def test_direction_verbs_of_markets_and_amounts_are_opposites() -> None:
    ev = "Brent crude rose 3% on Tuesday after the cartel announced deeper output cuts."
    assert [m.kind for m in check("Brent crude slid 3% on Tuesday after the cartel announced deeper output cuts.", ev)] == ["negation"]
    assert check("Brent crude gained 3% on Tuesday after the cartel announced deeper output cuts.", ev) == []


def test_a_share_named_by_a_size_word_is_a_quantifier() -> None:
    ev = "Only a small fraction of the asteroids catalogued so far are larger than one kilometre."
    assert [m.kind for m in check("Most of the asteroids catalogued so far are larger than one kilometre.", ev)] == ["quantifier"]


def test_never_is_a_universal_the_evidence_must_state() -> None:
    ev = "By default, git status does not show ignored files; the --ignored flag lists them."
    assert overclaim("git status never shows ignored files.", ev) == "never"
    assert overclaim("git status never shows ignored files.", "git status never shows ignored files.") is None
    assert overclaim("git status does not show ignored files by default.", ev) is None


def test_a_negated_comparison_is_a_superlative_not_a_denial() -> None:
    ev = "The Amazon discharges more water than any other river in the world."
    assert check("No other river in the world discharges more water than the Amazon.", ev) == []
    assert [m.kind for m in check("The Amazon does not discharge more water than any other river.", ev)] == ["negation"]


def test_a_roman_numeral_in_a_name_is_its_ordinal() -> None:
    ev = "Rationing of sugar in Britain ended in 1953, eight years after the Second World War."
    assert check("Sugar rationing in Britain ended in 1953, eight years after World War II.", ev) == []


def test_an_irregular_past_tense_after_and_starts_a_clause() -> None:
    parts = [text for text, _ in clauses("Amazon bought Whole Foods in 2017 and paid $13.7 billion for the grocer.")]
    assert parts == ["Amazon bought Whole Foods in 2017", "paid $13.7 billion for the grocer."]
    assert len(clauses("Cut flowers and fresh herbs were sold at the market.")) == 1
