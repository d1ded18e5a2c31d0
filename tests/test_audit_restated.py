"""Round 7 of the audit: what a faithful paraphrase restates in another form counts as covered (numbers in
words and fractions, basis points), and the checks that go with them
(a bound in the claim needs one as strong in the evidence, a quantifier against a share in words, a removal
undone). Every sentence here is written for the test, none is taken from the probe files."""

from __future__ import annotations

from bosun.core.audit.audit import audit
from bosun.core.audit.config import AuditConfig
from bosun.core.audit.consistency import agreeing_numbers, check, quantities

LEX = AuditConfig(matcher="bm25")


def test_fractions_and_halves_in_words_are_amounts() -> None:
    q = {x.raw: (round(x.value, 3), x.unit) for x in quantities("Nearly two thirds of the voters backed it.")}
    assert q == {"two thirds of the": (66.667, "%")}
    q = {x.raw: (x.value, x.unit, x.bound) for x in quantities("The probe travelled more than three and a half years.")}
    assert q["three and a half years"] == (3.5, "year", ">")
    # an ordinal, a part of a period or a position is no share of an amount
    for text in ("Revenue in the third quarter beat the fifth estimate.", "Output grew in the second half of the year.",
                 "A quarter of the way through the race he led.", "The economy shrank for two quarters of the year.",
                 "Half of the 2019 season was cancelled."):
        assert all(x.unit != "%" for x in quantities(text)), text
    assert check("Steel output grew 30% in the second half of the year.",
                 "Steel output grew 30% in the last six months of the year.") == []


def test_basis_points_and_fractions_of_a_point_agree() -> None:
    ev = "The bank of Canada cut its policy rate by half a percentage point to 3.75 percent."
    assert agreeing_numbers("The Bank of Canada lowered its policy rate by 50 basis points to 3.75%.", ev) == {"50", "3.75"}
    assert [m.kind for m in check("The Bank of Canada lowered its policy rate by 75 basis points.", ev)] == ["number"]


def test_a_bound_in_the_claim_needs_a_bound_as_strong_in_the_evidence() -> None:
    ev = "The vaccine was tested in more than 3,000 volunteers across four countries."
    assert [m.kind for m in check("The vaccine was tested in more than 5,000 volunteers.", ev)] == ["number"]
    assert check("The vaccine was tested in more than 2,000 volunteers.", ev) == []
    assert check("The vaccine was tested in 3,400 volunteers.", ev) == []  # a point above the bound: consistent
    ev = "Patients on the drug kept the weight off over 24 months of follow-up."
    assert [m.kind for m in check("Patients on the drug kept the weight off over 36 months.", ev)] == ["number"]


def test_a_quantifier_against_a_share_given_in_words() -> None:
    ev = "Roughly a third of the surveyed farmers said they had switched to drought-tolerant seed."
    assert [m.kind for m in check("Most surveyed farmers said they had switched to drought-tolerant seed.", ev)] == [
        "quantifier"]
    ev2 = "About three quarters of the surveyed farmers said they had switched to drought-tolerant seed."
    assert check("Most surveyed farmers said they had switched to drought-tolerant seed.", ev2) == []


def test_undoing_a_removal_is_the_opposite_of_the_removal() -> None:
    ev = "In 2021 the state legislature repealed the sales tax exemption on diapers."
    assert [m.kind for m in check("In 2021 the state legislature reinstated the sales tax exemption on diapers.", ev)] == [
        "negation"]
    ev2 = "Firefox 120 brought back the compact toolbar density option that had been removed in Firefox 89."
    assert check("Firefox 120 restored the compact toolbar density option.", ev2) == []
    assert [m.kind for m in check("Firefox 120 removed the compact toolbar density option.",
                                  "Firefox 120 restored the compact toolbar density option.")] == ["negation"]


def test_a_former_state_in_the_evidence_is_not_the_opposite_of_the_claim() -> None:
    ev = "The Hammersmith Bridge reopened to cyclists in 2021, after it had been closed since 2019."
    assert check("The Hammersmith Bridge reopened to cyclists in 2021.", ev) == []
    assert [m.kind for m in check("The Hammersmith Bridge closed to cyclists in 2021.",
                                  "The Hammersmith Bridge reopened to cyclists in 2021.")] == ["negation"]


def test_winner_and_loser_swapped_across_a_participle_clause() -> None:
    ev = "Spain won the Euro 2024 final in Berlin, beating England 2–1 with a late goal from Mikel Oyarzabal."
    assert [m.kind for m in check("England defeated Spain 2–1 in the Euro 2024 final in Berlin.", ev)] == ["role"]
    assert check("Spain defeated England 2–1 in the Euro 2024 final in Berlin.", ev) == []
    assert check("England were beaten by Spain 2–1 in the Euro 2024 final in Berlin.", ev) == []
    passive = "England were beaten 2–1 by Spain in the Euro 2024 final in Berlin."  # the passive told by its auxiliary
    assert check("Spain beat England 2–1 in the Euro 2024 final in Berlin.", passive) == []
    assert check("Spain beat England in the Euro 2024 final in Berlin.",
                 "England were narrowly beaten in the Euro 2024 final in Berlin, Spain winning 2–1.") == []
    assert [m.kind for m in check("England beat Spain 2–1 in the Euro 2024 final in Berlin.", passive)] == ["role"]


def test_buyer_and_bought_swapped_with_another_verb_of_the_family() -> None:
    ev = "Microsoft completed its purchase of LinkedIn in December 2016, having agreed to buy LinkedIn for $26.2 billion."
    assert [m.kind for m in check("In 2016 LinkedIn acquired Microsoft for $26.2 billion.", ev)] == ["role"]
    assert check("In 2016 Microsoft acquired LinkedIn for $26.2 billion.", ev) == []


def test_an_ambiguous_past_tense_after_and_starts_an_add_on_clause() -> None:
    from bosun.core.audit.match import clauses

    parts = [c for c, _ in clauses("The retailer posted a record quarter and cut its full-year debt target by half.")]
    assert parts == ["The retailer posted a record quarter", "cut its full-year debt target by half."]
    assert len(clauses("Salt and cut onions go into the pan first.")) == 1


def test_a_number_restated_in_words_is_not_missing_in_the_audit() -> None:
    chunks = [{"content": "The Reserve Bank of Australia raised its cash rate by a quarter of a percentage point to "
                          "4.35 percent on Tuesday."},
              {"content": "The bank said inflation was still too high."}]
    rec = audit("", chunks, "On Tuesday the Reserve Bank of Australia raised its cash rate by 25 basis points to "
                            "4.35%.", LEX)["claims"][0]
    assert rec["features"]["num_missing"] == 0.0 and rec["verdict"] != "contradicted"
    rec = audit("", chunks, "On Tuesday the Reserve Bank of Australia raised its cash rate by 50 basis points to "
                            "4.35%.", LEX)["claims"][0]
    assert rec["verdict"] == "contradicted"


def test_the_opposite_predicate_bound_to_the_claims_subject() -> None:
    ev = "In Kotlin, a val is read-only once assigned, whereas a var is mutable; strings are immutable."
    assert [m.kind for m in check("In Kotlin, strings are mutable once assigned.", ev)] == ["negation"]
    assert check("In Kotlin, strings are immutable.", ev) == []
    ev2 = "Venus is the hottest planet in the Solar System, and Neptune is the coldest."
    assert [m.kind for m in check("Venus is the coldest planet in the Solar System.", ev2)] == ["negation"]
    assert check("Neptune is the coldest planet in the Solar System.", ev2) == []


def test_an_attempt_in_the_evidence_is_not_the_event() -> None:
    ev = "In 2019 the county board voted 5-4 to close the Elm Street library branch, but the city council kept it open."
    assert [m.kind for m in check("In 2019 the county board closed the Elm Street library branch.", ev)] == ["negation"]
    assert check("In 2019 the county board voted to close the Elm Street library branch.", ev) == []
    done = "In 2019 the county board voted to close the Elm Street library branch, and it closed in June."
    assert check("In 2019 the county board closed the Elm Street library branch.", done) == []


def test_a_fraction_in_words_is_a_rounded_share() -> None:
    ev = "In the survey, 22 percent of adults said they had used a chatbot for medical advice."
    assert check("In the survey, nearly a quarter of adults said they had used a chatbot for medical advice.", ev) == []
    assert check("In the survey, a fifth of adults said they had used a chatbot for medical advice.", ev) == []
    assert [m.kind for m in check("In the survey, a third of adults said they had used a chatbot for medical advice.",
                                  "In the survey, 45 percent of adults said they had used a chatbot for medical advice.")
            ] == ["number"]


def test_the_same_side_in_the_evidence_confirms_a_direction_word() -> None:
    ev = "Consumer prices rose 0.4 percent in March after falling in February."
    assert check("Consumer prices climbed 0.4 percent in March.", ev) == []
    assert [m.kind for m in check("Consumer prices fell 0.4 percent in March.",
                                  "Consumer prices rose 0.4 percent in March, the statistics office said.")] == ["negation"]
    assert check("Firefox 120 restored the compact density option.",
                 "Firefox 120 reintroduced the compact density option that Firefox 89 removed.") == []


def test_a_same_side_word_the_claim_also_has_confirms_nothing() -> None:
    # "raised" is the claim's own other clause (the forecast), not the evidence's word for the shares
    ev = "Shares of the retailer fell 3 percent on Thursday after the company raised its full-year forecast."
    assert [m.kind for m in check("Shares of the retailer rose 3 percent on Thursday after the company raised its "
                                  "full-year forecast.", ev)] == ["negation"]
    assert check("Shares of the retailer dropped 3 percent on Thursday after the company raised its full-year "
                 "forecast.", ev) == []


def test_a_unit_written_as_its_symbol_is_covered() -> None:
    from bosun.core.audit.consistency import restated_units

    ev = "Pure gallium melts at about 30 °C, so it can melt in the palm of a hand."
    assert restated_units("Pure gallium melts at roughly 30 degrees Celsius.", ev) == {"celsius"}
    assert restated_units("Pure gallium melts at roughly 86 degrees Fahrenheit.", ev) == set()
    chunks = [{"content": ev}, {"content": "Gallium is a soft, silvery metal."}]
    rec = audit("", chunks, "Pure gallium melts at roughly 30 degrees Celsius.", LEX)["claims"][0]
    assert rec["features"]["specific_cov"] == 1.0


def test_a_negated_event_whose_verb_and_object_the_evidence_asserts_together() -> None:
    ev = ("In the winter of 2021 ten Nepali climbers of the expedition reached the summit together, completing the "
          "first winter ascent of the mountain known as K2.")
    assert [m.kind for m in check("The expedition failed to reach the summit of K2 in the winter of 2021.", ev)] == [
        "negation"]
    assert check("The expedition reached the summit of K2 in the winter of 2021.", ev) == []


def test_an_ordinal_is_a_number_of_its_noun() -> None:
    ev = "Operating income rose 12 percent to $4.1 billion in the third quarter, the company said."
    assert [m.kind for m in check("Operating income rose 12 percent to $4.1 billion in the fourth quarter.", ev)] == [
        "number"]
    assert [m.kind for m in check("The team finished the season in 2nd place.",
                                  "The team finished the season in 3rd place after losing its last two games.")] == [
        "number"]
    assert check("Operating income rose 12 percent to $4.1 billion in the third quarter.", ev) == []
    # a fraction is not an ordinal, and an ordinal the evidence does not count is not a mismatch
    assert check("A third of the respondents said they would switch providers.",
                 "About 33 percent of the respondents said they would switch providers.") == []
    assert check("In the fourth quarter, operating income rose 12 percent to $4.1 billion.",
                 "Operating income rose 12 percent to $4.1 billion in the quarter ending December.") == []


def test_common_nouns_that_trade_roles_are_a_role_swap() -> None:
    ev = "The regulator fined the bank $2 million for failing to report suspicious transactions."
    assert [m.kind for m in check("The bank fined the regulator $2 million for failing to report suspicious "
                                  "transactions.", ev)] == ["role"]
    assert check("The bank was fined $2 million by the regulator for failing to report suspicious transactions.",
                 ev) == []
    assert check("The regulator fined the bank $2 million for failing to report suspicious transactions.", ev) == []


def test_for_all_is_a_universal_unless_it_is_the_idiom() -> None:
    from bosun.core.audit.consistency import overclaim

    assert overclaim("The vaccine was approved for all adults.", "The vaccine was approved for adults over 65.") == "all"
    assert overclaim("Anyone may vote in the election.", "Only registered members may vote in the election.") == "anyone"
    assert overclaim("For all its faults, the bill passed the senate.", "The bill passed the senate despite its faults.") is None
    assert overclaim("Anyone may vote in the election.", "Any resident may vote in the election.") is None


def test_no_longer_negates_what_follows_it_and_agrees_with_an_ending() -> None:
    ev = "The library supports Python 3.9 and later; Python 3.8 is no longer supported."
    assert [m.kind for m in check("The library still supports Python 3.8.", ev)] == ["negation"]
    assert check("Night shifts have ended for engineers at the plant.",
                 "Engineers at the plant no longer work night shifts.") == []


def test_granting_and_denying_passing_and_rejecting_are_opposite_outcomes() -> None:
    assert [m.kind for m in check("The judge granted the motion to dismiss the case.",
                                  "The judge denied the motion to dismiss the case.")] == ["negation"]
    assert [m.kind for m in check("The senate rejected the bill 52-48.",
                                  "The senate passed the bill 52-48, sending it to the president.")] == ["negation"]
    assert check("The request for an extension until June was granted by the committee.",
                 "The committee granted the request for an extension until June.") == []
