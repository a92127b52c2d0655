"""The reader that sees the question (vhx.parsing.read_reply): each shape of reply a careful person reads, what
stays unknown and why, how the reading is recorded, and the property that a case and its negated twin (made by
vhx's own negator) read opposite from the same sentence."""

from __future__ import annotations

import pytest

from vhx.negation.rules import RuleNegator
from vhx.parsing import (
    CONTRADICTS,
    READ_COMPARISON,
    READ_CONCLUSION,
    READ_FIRST_WORD,
    READ_PARTS,
    READ_RESTATED,
    READ_UNKNOWN_REASONS,
    REFUSES,
    SAYS_NOTHING,
    UNCERTAIN_SUFFIX,
    parse_yes_no,
    read_reply,
    reading_parts,
)

# (question, reply, answer, how): the shapes of issue 64, and more of each
SHAPES = [
    # a conclusion later in the reply
    ("Is the bottle on the left the larger one?", "The label says 500 ml, so yes, it is the larger bottle.", "yes", READ_CONCLUSION),
    ("Is the cat black?", "The cat has dark grey fur with stripes. Therefore, no.", "no", READ_CONCLUSION),
    ("Is the sign red?", "It is hard to see the whole sign. In short: no.", "no", READ_CONCLUSION),
    ("Is the man holding an umbrella?", "Looking at the man's hands, he grips a long handle. So the answer is yes.", "yes", READ_CONCLUSION),
    ("Is there a clock on the wall?", "Based on the image, no, there is no clock on the wall.", "no", READ_CONCLUSION),
    # the question's claim restated, denied, or its contrary stated
    ("Is the door open?", "The door is open and a cat walks through it.", "yes", READ_RESTATED),
    ("Is the door open?", "The door is not open.", "no", READ_RESTATED),
    ("Is the door open?", "The door appears to be closed.", "no", READ_RESTATED),
    ("Is there a dog in the image?", "There is no dog in the image, only a cat on a sofa.", "no", READ_RESTATED),
    ("Is there a dog in the image?", "I can see a brown dog lying on the grass.", "yes", READ_RESTATED),
    ("Is the car red?", "The car in the picture is blue.", "no", READ_RESTATED),
    ("According to the chart, is China the leading importer of gold in 2018?",
     "According to the chart, Switzerland is the leading importer of gold in 2018, not China.", "no", READ_RESTATED),
    ("According to the chart, is China the leading importer of gold in 2018?",
     "According to the chart, China was the leading importer of gold in 2018.", "yes", READ_RESTATED),
    # comparisons answered by sameness or by order
    ("Is the left bar taller than the right bar?", "Both bars are the same height.", "no", READ_COMPARISON),
    ("Are the two bars the same height?", "They look equal.", "yes", READ_COMPARISON),
    ("Is the right orange circle larger than the left orange circle?", "The left orange circle is larger than the right one.", "no", READ_COMPARISON),
    ("Is the right orange circle larger than the left orange circle?", "The right orange circle is smaller than the left one.", "no", READ_COMPARISON),
    ("Is the right orange circle larger than the left orange circle?", "The left circle is smaller than the right circle.", "yes", READ_COMPARISON),
    ("Is the right orange circle the same size as the left orange circle?", "The two orange circles are different sizes.", "no", READ_COMPARISON),
    # numbers
    ("Is the price below $10?", "The price is $10, not below it.", "no", READ_RESTATED),
    ("Is the price below $10?", "The price shown is $7.50.", "yes", READ_RESTATED),
    ("Are there three dogs in the image?", "There are two dogs in the image.", "no", READ_RESTATED),
    ("Are there three dogs in the image?", "I count three dogs playing in the park.", "yes", READ_RESTATED),
    ("Are there two red cars on the street?", "There is a single red car parked on the street.", "no", READ_RESTATED),
    # a first word the reply's own conclusion reverses
    ("Is the glass more than half full?", "Yes, it is filled to the halfway mark exactly, so it is not more than half full.", "no", READ_CONCLUSION),
    ("Is the light on?", "No, wait. Looking again, the lamp glows, so yes.", "yes", READ_CONCLUSION),
    # claims in several parts
    ("Did Brazil lead, followed by Peru and Chile?", "Brazil led, but Chile was second and Peru third.", "no", READ_PARTS),
    ("Did Brazil lead, followed by Peru and Chile?", "Brazil was first, Peru second and Chile third.", "yes", READ_PARTS),
    ("Is there a dog and a cat on the sofa?", "There is a dog on the sofa, but there is no cat.", "no", READ_PARTS),
    # negated questions (vhx's twins) answered by restating the fact
    ("Is there no cup on the table?", "No, there is no cup.", "yes", READ_RESTATED),
    ("Is there not a dog in the image?", "There is a dog sleeping on the rug.", "no", READ_RESTATED),
    ("Is it false that the car is red?", "The car is red.", "no", READ_RESTATED),
    ("Is the door not open?", "The door is closed.", "yes", READ_RESTATED),
    # chart, map, illusion and figure questions in the way chat models answer them
    ("Is the top line longer than the bottom line?", "In the image, the top line appears longer than the bottom one. However, "
     "this is an optical illusion known as the Müller-Lyer illusion, and the lines are actually the same length.", "no", READ_CONCLUSION),
    ("According to the chart, did Apple have the highest revenue in 2020?",
     "The chart shows that in 2020, Amazon had the highest revenue, followed by Apple.", "no", READ_RESTATED),
    ("Does the image show the flag of Japan?", "The image shows a red flag with a yellow star, which is the flag of Vietnam.", "no", READ_RESTATED),
    ("Is the blue line above the red line in the chart?", "In the chart, the red line is above the blue line throughout.", "no", READ_COMPARISON),
    ("According to the table, is the GDP of France larger than that of Germany?", "According to the table, Germany has a larger GDP than France.",
     "no", READ_COMPARISON),
    ("According to the image, does the population increase from 2000 to 2010?",
     "According to the image, the population decreased from 2000 to 2010.", "no", READ_RESTATED),
    ("Is the cricket bat under the batter's body Please answer yes or no.", "yes, the cricket bat is under the batter's body in the image.",
     "yes", READ_FIRST_WORD),
    ("Does the appliance to the left of the dishwasher look black?", "The appliance is black.", "yes", READ_RESTATED),
    ("Is there a bridge in the image?", "I'd say no — what looks like a bridge is the shadow of a power line.", "no", READ_CONCLUSION),
    ("Do the cube and the ball have the same shape?", "The shape of the cube is square, but the ball is round.", "no", READ_COMPARISON),
    ("Is there a dog in the image?", "A brown dog is lying on the grass next to the picnic blanket.", "yes", READ_RESTATED),
    ("Is there a backpack in the image?", "I cannot see a backpack anywhere in the image.", "no", READ_RESTATED),
    ("Are there only two cakes in this image?", "There are not only two cakes in this image; there are three.", "no", READ_RESTATED),
    # first words as before
    ("Is there a dog?", "Yes, there is a dog lying on the grass, not moving.", "yes", READ_FIRST_WORD),
    ("Is there a dog?", "No.", "no", READ_FIRST_WORD),
    ("Is the car red?", "**Yes**, the car is red.", "yes", READ_FIRST_WORD),
]

# shapes added after the labelled sets were measured (wordings of their own, not the sets' items)
SHAPES += [
    # an introduction, then "I would answer ..." / "I'd say ..."
    ("Does the river cross the border?", "Following the blue line east, it reaches the border at the bridge. "
     "Given that, I would answer yes.", "yes", READ_CONCLUSION),
    ("Is the tower taller than the church?", "From the shadows, I'd say no.", "no", READ_CONCLUSION),
    # a dash that sets the final answer apart
    ("Is the bus red?", "The paint looks bright scarlet in the sun — yes.", "yes", READ_CONCLUSION),
    # a calculation worked out to the value asked about, or to another
    ("Is angle y equal to 45 degrees?", "The angles add to 180°, so y = 180° - 90° - 45° = 45°.", "yes", READ_RESTATED),
    ("Is the sum shown on the board 20?", "The board shows 8 + 9, which equals 17.", "no", READ_RESTATED),
    # "correct" as the answer word is not a word of the claim; the question's own "not" names no side
    ("Is the top bar not shorter than the bottom bar?", "Correct, it is not shorter; the two bars match.", "yes", READ_FIRST_WORD),
    # values "from A to B" against a claim of a direction; a clock's time against the hour asked
    ("According to the chart, did exports rise between 2015 and 2018?",
     "Per the chart, exports went from 4.2 billion in 2015 to 3.9 billion in 2018.", "no", READ_RESTATED),
    ("Did the number of visitors decrease from 2010 to 2012?", "From 2010 to 2012 visitors went from 90 thousand to 60 thousand.",
     "yes", READ_RESTATED),
    ("Is the clock showing 7 o'clock?", "The clock on the tower reads roughly 11:50.", "no", READ_RESTATED),
    # the thing named after "resembles" is compared with, not claimed: the building named is another one
    ("Is this building the Colosseum?", "The building shown is a modern stadium in Lisbon, which resembles the Colosseum.", "no",
     READ_RESTATED),
    # the text a reply says is written, against the text a question quotes; "in the image" is the medium, no place
    ("Is the word on the banner 'Welcome'?", 'The banner reads "Goodbye" in large letters.', "no", READ_RESTATED),
    ("Is the text on the label 'Organic Honey'?", "The label's text says 'ORGANIC HONEY'.", "yes", READ_RESTATED),
    ("Is the text in this picture 'Open'?", 'Yes, the text in the picture reads "Open".', "yes", READ_FIRST_WORD),
    # a multiple-choice option label between the announcement and the word (MathVista's "(A) Yes (B) No")
    ("Is the blue bar the tallest?", "The correct answer is **(B) No**.", "no", READ_CONCLUSION),
    ("Is f(0) < 1?", "Looking at the curve near zero, the answer is (A) yes.", "yes", READ_CONCLUSION),
    # a compass word names the claim's direction
    ("Does the map show Maine in the north-east of the country?", "Yes, the map shows Maine in the northeastern corner of the "
     "country.", "yes", READ_FIRST_WORD),
    # a pronoun alone names nothing of the claim: "it" is the image here
    ("Is the rug under the table?", "There is no rug in this picture, but it does show a tiled floor.", "no", READ_RESTATED),
]

UNKNOWNS = [
    ("Is there a dog?", "Yes, there is a dog. No, there isn't.", CONTRADICTS),
    ("Is the car red?", "No Yes Yes Yes", CONTRADICTS),
    ("Is the door open?", "The door is open. The door is closed.", CONTRADICTS),
    ("Is there a dog?", "The image shows a sunny beach with people walking.", SAYS_NOTHING),
    ("Is there a dog?", "I'm sorry, I cannot determine that from the image.", REFUSES),
    ("Is the left bar taller than the right bar?", "It is difficult to tell which bar is taller from this image.", REFUSES),
    ("Is the animal a dog?", "The animal might be a dog or a fox.", REFUSES),
    ("Is the door open?", "To determine whether the door is open, look at the hinges.", SAYS_NOTHING),
    # the claim's words only name what the sentence speaks of: it does not say whether the claim holds
    ("Is the man in the bottom of the photo?", "The man in the bottom of the photo is a tennis player.", SAYS_NOTHING),
    ("Is the water cold?", "It's hard to say; the water might be cold given the snow, but it could be a heated pool.", REFUSES),
    ("Are the bananas ripe?", "Some of the bananas look ripe, with yellow skin, while others are still green.", REFUSES),
    ("Is the beach wet in this image?", "The beach appears to be wet in parts of the image, near the waterline.", REFUSES),
    ("Is the person the same as in the previous image?", "I can only see one image here, so I can't compare it to another.", REFUSES),
    # a refusal to name people is no denial, whatever the description after it
    ("Is the woman in the photo Serena Williams?", "Sorry, I cannot identify people from their faces. She holds a tennis racket "
     "and wears a white dress.", REFUSES),
    # the thing named after "resembles" is compared with, not claimed
    ("Is this a photo of the CN Tower?", "The photo shows the Sky Tower, a tall tower in Auckland, which resembles the CN Tower.",
     SAYS_NOTHING),
    ("Is the man at the podium Justin Trudeau?", "I'm sorry, but I can't identify real people in images. However, I can tell you "
     "that the man wears a dark suit and stands at a podium.", REFUSES),
    # 'is this "..."' asks what the thing is, not what is written on it: a transcription does not answer it
    ('According to the text in this image, is this "Lemon Cake"?', 'The text reads "Orange Tart" in Chinese characters.', SAYS_NOTHING),
    # one pair of values cannot settle a claim about two things
    ("Did both rice and wheat prices fall in 2008?", "Rice prices went from 300 to 700 dollars a ton.", SAYS_NOTHING),
]


@pytest.mark.parametrize(("question", "reply", "answer", "how"), SHAPES)
def test_shapes_a_person_reads(question: str, reply: str, answer: str, how: str):
    reading = read_reply(reply, question)
    assert (reading.answer, reading.how) == (answer, how), reading


@pytest.mark.parametrize(("question", "reply", "reason"), UNKNOWNS)
def test_what_stays_unknown_says_why(question: str, reply: str, reason: str):
    reading = read_reply(reply, question)
    assert reading.answer == "unknown" and reading.reason == reason, reading
    assert reading.label == f"unknown: {reason}" and reason in READ_UNKNOWN_REASONS


def test_uncertain_readings_are_labelled_and_parsed_back():
    reading = read_reply("Yes, it is filled to the halfway mark exactly, so it is not more than half full.",
                         "Is the glass more than half full?")
    assert reading.uncertain and reading.label == READ_CONCLUSION + UNCERTAIN_SUFFIX
    assert reading_parts(reading.label) == (READ_CONCLUSION, None, True)
    assert reading_parts("unknown: contradicts itself") == ("unknown", CONTRADICTS, False)
    plain = read_reply("Yes.", "Is there a dog?")
    assert not plain.uncertain and plain.label == READ_FIRST_WORD


@pytest.mark.parametrize("reply", ["Yes", "No.", "yes, there is.", "**No**", "The answer is no.", "<think>hmm</think>Yes",
                                   "<think>Yes", "", None, r"\boxed{No}", "Maybe"])
def test_without_a_question_first_words_read_as_before(reply):
    assert read_reply(reply).answer == parse_yes_no(reply)
    assert read_reply(reply, "Is there a dog?").answer == parse_yes_no(reply)


# Declarative replies whose reading rests on the claim: the same sentence against the question and against its
# twin made by vhx's own negator must read opposite (a twin flips the answer on every reading).
TWIN_CASES = [
    ("Is there a dog in the image?", "There is a dog on the sofa."),
    ("Is there a dog in the image?", "There is no dog in this picture."),
    ("Is the door open?", "The door appears to be closed."),
    ("Is the door open?", "The door is wide open."),
    ("Is the left bar taller than the right bar?", "Both bars are the same height."),
    ("Is the left bar taller than the right bar?", "The left bar is taller than the right bar."),
    ("Are there three dogs?", "There are two dogs."),
    ("Is the price below $10?", "The price is $10, not below it."),
    ("Is the cat black?", "The cat is white with grey spots."),
    ("According to the chart, is China the leading importer of gold in 2018?", "Switzerland is the leading importer of gold in 2018."),
    ("Are all of the characters from One Piece?", "All the characters are from One Piece."),
    ("Is the man wearing a hat?", "The man is not wearing a hat."),
]


@pytest.mark.parametrize(("question", "reply"), TWIN_CASES)
def test_a_sentence_reads_opposite_against_a_question_and_its_twin(question: str, reply: str):
    twin = RuleNegator().negate(question).question
    first, second = read_reply(reply, question), read_reply(reply, twin)
    assert first.answer in ("yes", "no"), first
    assert {first.answer, second.answer} == {"yes", "no"}, (twin, first, second)


def test_long_and_odd_replies_stay_fast_and_total():
    q = "Is there a dog in the image?"
    for reply in ["There is a dog. " * 20_000, "no " * 50_000 + "yes", "," * 100_000, "\n" * 50_000, "The dog " * 30_000]:
        reading = read_reply(reply, q)
        assert reading.answer in ("yes", "no", "unknown")
    for question in ["", "?", "Describe the image.", "What colour is the car?", "x" * 5000]:
        assert read_reply("The car is red.", question).answer == "unknown"


def test_the_first_word_reader_is_the_question_blind_rules():
    from vhx.parsing import READERS, check_reader, read_with

    assert READERS == ("question", "first-word")
    for reply in ["Yes, there is.", "the apple does not look fresh", "So the answer is no.", "", None, "<think>Yes"]:
        got = read_with("first-word", reply, "Is the fruit fresh?")
        assert got.answer == parse_yes_no(reply)
    assert read_with("first-word", "So the answer is no.", "Q?").how == READ_CONCLUSION
    assert read_with("first-word", "No, it is.", "Q?").how == READ_FIRST_WORD
    assert read_with("question", "The door is closed.", "Is the door open?") == read_reply("The door is closed.", "Is the door open?")
    with pytest.raises(ValueError, match="reading must be one of"):
        check_reader("judge")


def test_agreement_with_careful_human_readings_on_the_labelled_replies():
    """The README's numbers: on the 974 labelled replies of tests/data/replies the reader agrees with the human reading
    on 87.6% (the first-word rules: 57%) and reads 0.6% as the opposite answer (2.3%)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "reading_quality.py"
    spec = importlib.util.spec_from_file_location("reading_quality", path)
    quality = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quality)
    items = quality.load() + quality.load(quality.TEST)
    assert len(items) == 974
    ours = quality.measure(items, lambda r, q: read_reply(r, q).answer)
    blind = quality.measure(items, lambda r, q: parse_yes_no(r))
    assert round(ours["agreement"], 3) >= 0.876 and round(blind["agreement"], 2) <= 0.57, (ours, blind)
    assert round(ours["opposite"], 3) <= 0.006 and round(blind["opposite"], 3) >= 0.023, (ours, blind)


def test_rows_record_their_reading_and_the_report_counts_replies_by_it(tmp_path):
    """A generate-mode backend's rows carry `reading`; the report's "How the replies were read" table counts them per
    model, with the uncertain ones and the accuracy of each reading (hand-counted here)."""
    import datasets
    from PIL import Image

    from vhx.models.base import prediction_from_replies
    from vhx.predict import predict_dataset
    from vhx.report import report
    from vhx.schema import FEATURES, make_case

    cases = [  # question, answer, reply
        ("Is there a dog?", "yes", "Yes, a dog."),                       # first word, right
        ("Is the door open?", "no", "The door appears to be closed."),   # restated claim (uncertain: contrary), right
        ("Is the cat black?", "yes", "The cat is black."),               # restated claim, right
        ("Is the car red?", "no", "The car is red."),                    # restated claim, wrong
        ("Is there a bird?", "no", "The image shows a beach."),          # unknown: says nothing, wrong
    ]

    class Scripted:
        name, options = "scripted", {"kind": "scripted"}

        def predict(self, images, questions):
            replies = {q: r for q, _, r in cases}
            return [prediction_from_replies([replies[q]], q) for q in questions]

    rows = [make_case(source="custom", subset="s", source_id=i, image=Image.new("RGB", (8, 8), "red"), image_id=f"i{i}",
                      question=q, answer=a, negated=False) for i, (q, a, _) in enumerate(cases)]
    data = datasets.DatasetDict({"original": datasets.Dataset.from_list(rows, features=FEATURES)})
    path = predict_dataset(data, Scripted(), tmp_path / "run", progress=False)
    import json

    got = [json.loads(line)["reading"] for line in path.read_text().splitlines()]
    assert got == ["first word", "restated claim (uncertain)", "restated claim", "restated claim",
                   "unknown: says nothing of the question"]
    md = (tmp_path / "rep" / "report.md")
    report([tmp_path / "run"], tmp_path / "rep")
    section = md.read_text().split("## How the replies were read", 1)[1].split("\n## ", 1)[0]
    lines = {l.split("|")[2].strip(): [c.strip() for c in l.split("|")[3:7]] for l in section.splitlines() if l.startswith("| scripted")}
    assert lines["first word"] == ["1", "20.0%", "0", "1.000"]
    assert lines["restated claim"] == ["3", "60.0%", "1", "0.667"]
    assert lines["unknown"] == ["1", "20.0%", "0", "0.000"]
