"""Rule negation (hand-written table, all 9,000 real POPE questions, double negation), dataset pairing
(num_proc, image bytes, ids) and the human-review export."""

from __future__ import annotations

import base64
import csv
import io
import pickle
import re
from collections import Counter
from pathlib import Path

import datasets
import pytest
from PIL import Image

from conftest import read_pope_questions
from vhx.errors import DataError
from vhx.negation import (
    ALL_TO_ANY,
    FORMULA_OPERATOR,
    MODAL_UNABLE,
    UNGRAMMATICAL_BARE_VERB,
    UNGRAMMATICAL_NUMBER,
    surface_fixed,
    COORDINATED_PREDICATE,
    COUNT_WORDING,
    GUESSED_SPLIT,
    MODAL_SCOPE,
    NOT_ONLY,
    QUANTIFIED_SUBJECT,
    NegationResult,
    Negator,
    RuleNegator,
    negate_dataset,
    rule_coverage,
)
from vhx.review import REVIEW_COLUMNS, review_export
from vhx.schema import FEATURES, loads, make_case, pair_id_of, validate_dataset

NEG = RuleNegator()
FRAME = RuleNegator("frame")
CONTRACTED = RuleNegator("contracted")

# (question, expected negation, rule) in the paper prompt's literal form ("Is it false that ..."): POPE, MMVP
# and VHTest shapes, synthetic-benchmark shapes, and the tricky parts of the subject heuristic.
TABLE = [
    # simple existence: a/an/any -> no
    ("Is there a dog in the image?", "Is there no dog in the image?", "a_to_no"),
    ("Is there an apple in the image?", "Is there no apple in the image?", "an_to_no"),
    ("Is there a shadow on the flower?", "Is there no shadow on the flower?", "a_to_no"),
    ("Are there any cats?", "Are there no cats?", "any_to_no"),
    ("Is there a unicorn in the image?", "Is there no unicorn in the image?", "a_to_no"),
    ("Is there a red circle in the image?", "Is there no red circle in the image?", "a_to_no"),
    ("Is there no dog in the image?", "Is there a dog in the image?", "no_to_a"),
    ("Are there no cats on the sofa?", "Are there any cats on the sofa?", "no_to_any"),
    # counts and coordinated objects: "no" would change the meaning
    ("Are there two dogs in the image?", "Is it false that there are two dogs in the image?", "is_it_false/there"),
    ("Are there 3 apples in the image?", "Is it false that there are 3 apples in the image?", "is_it_false/there"),
    ("Is there one circle in the image?", "Is it false that there is one circle in the image?", "is_it_false/there"),
    ("Are there more than two dogs?", "Is it false that there are more than two dogs?", "is_it_false/there"),
    ("Is there a dog and a cat in the image?", "Is it false that there is a dog and a cat in the image?", "is_it_false/there"),
    # be + predicate (MMVP / VHTest colour, shape, size, position, orientation, OCR)
    ("Are the butterfly's wings open?", "Is it false that the butterfly's wings are open?", "is_it_false/be"),
    (
        "Are the butterfly's wings closer to being open?",
        "Is it false that the butterfly's wings are closer to being open?",
        "is_it_false/be",
    ),
    ("Is the dog facing left?", "Is it false that the dog is facing left?", "is_it_false/be"),
    ("Was the cup red?", "Is it false that the cup was red?", "is_it_false/be"),
    ("Is the cat on the left of the dog?", "Is it false that the cat is on the left of the dog?", "is_it_false/be"),
    ("Is the car red?", "Is it false that the car is red?", "is_it_false/be"),
    ("Is the clock round?", "Is it false that the clock is round?", "is_it_false/be"),
    ("Is the dog bigger than the cat?", "Is it false that the dog is bigger than the cat?", "is_it_false/be"),
    ("Is the text 'OPEN' written on the sign?", "Is it false that the text 'OPEN' is written on the sign?", "is_it_false/be"),
    ("Is the text 'NO PARKING' on the sign?", "Is it false that the text 'NO PARKING' is on the sign?", "is_it_false/be"),
    ("Is the arrow pointing up?", "Is it false that the arrow is pointing up?", "is_it_false/be"),
    (
        "Is the red circle on the left side of the image?",
        "Is it false that the red circle is on the left side of the image?",
        "is_it_false/be",
    ),
    ("Is the red square in the bottom half of the image?",
     "Is it false that the red square is in the bottom half of the image?", "is_it_false/be"),
    ("Is the square red?", "Is it false that the square is red?", "is_it_false/be"),
    ("Is the moon crescent shaped?", "Is it false that the moon is crescent shaped?", "is_it_false/be"),
    ("Is the traffic light green?", "Is it false that the traffic light is green?", "is_it_false/be"),
    ("Is the dark blue car parked?", "Is it false that the dark blue car is parked?", "is_it_false/be"),
    ("Is the color of the car red?", "Is it false that the color of the car is red?", "is_it_false/be"),
    ("Is the cat fluffy?", "Is it false that the cat is fluffy?", "is_it_false/be"),
    ("Is the man on the left wearing glasses?", "Is it false that the man on the left is wearing glasses?", "is_it_false/be"),
    ("Is the glass on the table empty?", "Is it false that the glass on the table is empty?", "is_it_false/be"),
    ("Are the cat and the dog sleeping?", "Is it false that the cat and the dog are sleeping?", "is_it_false/be"),
    ("Are all the dogs brown?", "Is it false that all the dogs are brown?", "is_it_false/be"),
    ("Is this a cat?", "Is it false that this is a cat?", "is_it_false/be"),
    ("Is it raining?", "Is it false that it is raining?", "is_it_false/be"),
    ("Is the image black and white?", "Is it false that the image is black and white?", "is_it_false/be"),
    (
        "Is the school bus driving towards the camera?",
        "Is it false that the school bus is driving towards the camera?",
        "is_it_false/be",
    ),
    ("Is the picture taken indoors?", "Is it false that the picture is taken indoors?", "is_it_false/be"),
    # do-support with verb agreement
    ("Does the man wear a hat?", "Is it false that the man wears a hat?", "is_it_false/do"),
    ("Does the man have a beard?", "Is it false that the man has a beard?", "is_it_false/do"),
    ("Do the dogs run?", "Is it false that the dogs run?", "is_it_false/do"),
    ("Does the woman carry a bag?", "Is it false that the woman carries a bag?", "is_it_false/do"),
    ("Does the boy watch TV?", "Is it false that the boy watches TV?", "is_it_false/do"),
    ("Does the dog go outside?", "Is it false that the dog goes outside?", "is_it_false/do"),
    ("Does the sign say 'STOP'?", "Is it false that the sign says 'STOP'?", "is_it_false/do"),
    ("Does the dog on the left have a collar?", "Is it false that the dog on the left has a collar?", "is_it_false/do"),
    ("Does the man grab a cup?", "Is it false that the man grabs a cup?", "is_it_false/do"),
    ("Does it have stripes?", "Is it false that it has stripes?", "is_it_false/do"),
    ("Do you see a dog?", "Is it false that you see a dog?", "is_it_false/do"),
    ("Does the man not wear a hat?", "Is it false that the man does not wear a hat?", "is_it_false/do"),
    ("Doesn't the man wear a hat?", "Is it false that the man doesn't wear a hat?", "is_it_false/do"),
    ("Did the man wear a hat?", "Is it false that the man wore a hat?", "is_it_false/do"),
    # modals and perfect have
    ("Can the bird fly?", "Is it false that the bird can fly?", "is_it_false/aux"),
    ("Can you see the sky?", "Is it false that you can see the sky?", "is_it_false/aux"),
    ("Can the dog on the left jump?", "Is it false that the dog on the left can jump?", "is_it_false/aux"),
    ("Could the dog be sleeping?", "Is it false that the dog could be sleeping?", "is_it_false/aux"),
    ("Has the man taken off his hat?", "Is it false that the man has taken off his hat?", "is_it_false/aux"),
    # own outputs and the true/false swap
    ("Is it false that the car is red?", "Is the car red?", "undo_is_it_false"),
    ("Is it true that the car is red?", "Is it false that the car is red?", "true_to_false"),
    # text around the question is kept; unicode passes through
    ("In the image, is there a dog?", "In the image, is there no dog?", "a_to_no"),
    ("Is there a dog in the image? Answer yes or no.", "Is there no dog in the image? Answer yes or no.", "a_to_no"),
    ("Is there a café in the image?", "Is there no café in the image?", "a_to_no"),
    ("Is the text '東京' written on the sign?", "Is it false that the text '東京' is written on the sign?", "is_it_false/be"),
    ("Is the text \u201cOPEN NOW\u201d written on the sign?",
     "Is it false that the text \u201cOPEN NOW\u201d is written on the sign?", "is_it_false/be"),
    ("Are the butterfly\u2019s wings open?", "Is it false that the butterfly\u2019s wings are open?", "is_it_false/be"),
    # a prepositional phrase is the subject's when a predicate follows it, the predicate when it ends
    ("Is the lamp on the desk turned on?", "Is it false that the lamp on the desk is turned on?", "is_it_false/be"),
    ("Is the car in the street parked?", "Is it false that the car in the street is parked?", "is_it_false/be"),
    ("Is the logo on the cap a star?", "Is it false that the logo on the cap is a star?", "is_it_false/be"),
    ("In the picture, is one of the car's doors open?", "In the picture, is it false that one of the car's doors is open?", "is_it_false/be"),
    ("Are some of the cars parked?", "Is it false that some of the cars are parked?", "is_it_false/be"),
    ("Is the sign on the building written in English?", "Is it false that the sign on the building is written in English?", "is_it_false/be"),
    ("Is the person in the photo a woman?", "Is it false that the person in the photo is a woman?", "is_it_false/be"),
    ("Is the glass on the table half full?", "Is it false that the glass on the table is half full?", "is_it_false/be"),
    ("Is the man on the right a doctor?", "Is it false that the man on the right is a doctor?", "is_it_false/be"),
    ("Is the cup to the left of the laptop?", "Is it false that the cup is to the left of the laptop?", "is_it_false/be"),
    ("Is the cup next to a plate?", "Is it false that the cup is next to a plate?", "is_it_false/be"),
    ("Is the man in the middle of a crowd?", "Is it false that the man is in the middle of a crowd?", "is_it_false/be"),
    ("Is the cat on the painted chair?", "Is it false that the cat is on the painted chair?", "is_it_false/be"),
    # a prepositional phrase on the subject, then a predicate noun phrase, participle, adjective or adverb
    ("Is the cyclist behind the yellow delivery truck called Maria Lopez?",
     "Is it false that the cyclist behind the yellow delivery truck is called Maria Lopez?", "is_it_false/be"),
    ("Is the painting above the fireplace Mona Lisa?", "Is it false that the painting above the fireplace is Mona Lisa?", "is_it_false/be"),
    ("Is the sign near the door 'EXIT'?", "Is it false that the sign near the door is 'EXIT'?", "is_it_false/be"),
    ("Is the price on the tag 4.99?", "Is it false that the price on the tag is 4.99?", "is_it_false/be"),
    ("Is the sum of the numbers on the board equal to 30?", "Is it false that the sum of the numbers on the board is equal to 30?", "is_it_false/be"),
    ("Is the kettle on the stove mostly empty?", "Is it false that the kettle on the stove is mostly empty?", "is_it_false/be"),
    ("Is the dog in the yard not barking?", "Is it false that the dog in the yard is not barking?", "is_it_false/be"),
    ("Is the van primarily white in color?", "Is it false that the van is primarily white in color?", "is_it_false/be"),
    # context sentences before the question, a missing "?", the full-width question mark
    ("I am hungry. Is the dish on the table a good choice?", "I am hungry. Is it false that the dish on the table is a good choice?", "is_it_false/be"),
    ("Is the lamp on the desk Please answer yes or no.", "Is it false that the lamp is on the desk Please answer yes or no.", "is_it_false/be"),
    ("Is the bowl under the shelf\uff1f Please answer yes or no.", "Is it false that the bowl is under the shelf\uff1f Please answer yes or no.", "is_it_false/be"),
    ("Could the robot in the photo lift the box?", "Is it false that the robot in the photo could lift the box?", "is_it_false/aux"),
    ("Is the vase in the photo suitable as a gift?", "Is it false that the vase in the photo is suitable as a gift?", "is_it_false/be"),
    ("Is the result on the screen 12-4?", "Is it false that the result on the screen is 12-4?", "is_it_false/be"),
    ("Is the statue behind the fountain the town's founder?", "Is it false that the statue behind the fountain is the town's founder?", "is_it_false/be"),
    ("Is the kettle on the stove next to the sink?", "Is it false that the kettle on the stove is next to the sink?", "is_it_false/be"),
    ("Is the cat under the table in the image?", "Is it false that the cat is under the table in the image?", "is_it_false/be"),
    ("Is the horse near the barn black and white?", "Is it false that the horse near the barn is black and white?", "is_it_false/be"),
    ("Does the girl in the photo hold something in her hand?", "Is it false that the girl in the photo holds something in her hand?", "is_it_false/do"),
]

# The same questions in the default, natural form (read one by one): "not" after the subject where the frame
# above puts the auxiliary after it; the frame stays, with its note, only for quantified subjects.
NATURAL_TABLE = [
    ('Is there a dog in the image?', 'Is there no dog in the image?', 'a_to_no', ""),
    ('Is there an apple in the image?', 'Is there no apple in the image?', 'an_to_no', ""),
    ('Is there a shadow on the flower?', 'Is there no shadow on the flower?', 'a_to_no', ""),
    ('Are there any cats?', 'Are there no cats?', 'any_to_no', ""),
    ('Is there a unicorn in the image?', 'Is there no unicorn in the image?', 'a_to_no', ""),
    ('Is there a red circle in the image?', 'Is there no red circle in the image?', 'a_to_no', ""),
    ('Is there no dog in the image?', 'Is there a dog in the image?', 'no_to_a', ""),
    ('Are there no cats on the sofa?', 'Are there any cats on the sofa?', 'no_to_any', ""),
    ('Are there two dogs in the image?', 'Are there not exactly two dogs in the image?', 'not_exactly/there', COUNT_WORDING),
    ('Are there 3 apples in the image?', 'Are there not exactly 3 apples in the image?', 'not_exactly/there', COUNT_WORDING),
    ('Is there only one door?', 'Is it false that there is only one door?', 'is_it_false/there', NOT_ONLY),
    ('Is there one circle in the image?', 'Is there not exactly one circle in the image?', 'not_exactly/there', COUNT_WORDING),
    ('Are there more than two dogs?', 'Are there not more than two dogs?', 'not/there', ""),
    ('Is there a dog and a cat in the image?', 'Is it false that there is a dog and a cat in the image?', 'is_it_false/there', COORDINATED_PREDICATE),
    ("Are the butterfly's wings open?", "Are the butterfly's wings not open?", 'not/be', ""),
    ("Are the butterfly's wings closer to being open?", "Are the butterfly's wings not closer to being open?", 'not/be', ""),
    ('Is the dog facing left?', 'Is the dog not facing left?', 'not/be', ""),
    ('Was the cup red?', 'Was the cup not red?', 'not/be', ""),
    ('Is the cat on the left of the dog?', 'Is the cat not on the left of the dog?', 'not/be', ""),
    ('Is the car red?', 'Is the car not red?', 'not/be', ""),
    ('Is the clock round?', 'Is the clock not round?', 'not/be', ""),
    ('Is the dog bigger than the cat?', 'Is the dog not bigger than the cat?', 'not/be', ""),
    ("Is the text 'OPEN' written on the sign?", "Is the text 'OPEN' not written on the sign?", 'not/be', ""),
    ("Is the text 'NO PARKING' on the sign?", "Is the text 'NO PARKING' not on the sign?", 'not/be', ""),
    ('Is the arrow pointing up?', 'Is the arrow not pointing up?', 'not/be', ""),
    ('Is the red circle on the left side of the image?', 'Is the red circle not on the left side of the image?', 'not/be', ""),
    ('Is the red square in the bottom half of the image?', 'Is the red square not in the bottom half of the image?', 'not/be', ""),
    ('Is the square red?', 'Is the square not red?', 'not/be', ""),
    ('Is the moon crescent shaped?', 'Is the moon not crescent shaped?', 'not/be', ""),
    ('Is the traffic light green?', 'Is the traffic light not green?', 'not/be', ""),
    ('Is the dark blue car parked?', 'Is the dark blue car not parked?', 'not/be', ""),
    ('Is the color of the car red?', 'Is the color of the car not red?', 'not/be', ""),
    ('Is the cat fluffy?', 'Is the cat not fluffy?', 'not/be', ""),
    ('Is the man on the left wearing glasses?', 'Is the man on the left not wearing glasses?', 'not/be', ""),
    ('Is the glass on the table empty?', 'Is the glass on the table not empty?', 'not/be', ""),
    ('Are the cat and the dog sleeping?', 'Are the cat and the dog not sleeping?', 'not/be', ""),
    ('Are all the dogs brown?', 'Are any of the dogs not brown?', 'all_to_any', ALL_TO_ANY),
    ('Is this a cat?', 'Is this not a cat?', 'not/be', ""),
    ('Is it raining?', 'Is it not raining?', 'not/be', ""),
    ('Is the image black and white?', 'Is the image not black and white?', 'not/be', ""),
    ('Is the school bus driving towards the camera?', 'Is the school bus not driving towards the camera?', 'not/be', ""),
    ('Is the picture taken indoors?', 'Is the picture not taken indoors?', 'not/be', ""),
    ('Does the man wear a hat?', 'Does the man not wear a hat?', 'not/do', ""),
    ('Does the man have a beard?', 'Does the man not have a beard?', 'not/do', ""),
    ('Do the dogs run?', 'Do the dogs not run?', 'not/do', ""),
    ('Does the woman carry a bag?', 'Does the woman not carry a bag?', 'not/do', ""),
    ('Does the boy watch TV?', 'Does the boy not watch TV?', 'not/do', ""),
    ('Does the dog go outside?', 'Does the dog not go outside?', 'not/do', ""),
    ("Does the sign say 'STOP'?", "Does the sign not say 'STOP'?", 'not/do', ""),
    ('Does the dog on the left have a collar?', 'Does the dog on the left not have a collar?', 'not/do', ""),
    ('Does the man grab a cup?', 'Does the man not grab a cup?', 'not/do', ""),
    ('Does it have stripes?', 'Does it not have stripes?', 'not/do', ""),
    ('Do you see a dog?', 'Do you not see a dog?', 'not/do', ""),
    ('Does the man not wear a hat?', 'Does the man wear a hat?', 'drop_not', ""),
    ("Doesn't the man wear a hat?", 'Does the man wear a hat?', "drop_n't", ""),
    ('Did the man wear a hat?', 'Did the man not wear a hat?', 'not/do', ""),
    ('Can the bird fly?', 'Is the bird unable to fly?', 'can_to_unable', MODAL_UNABLE),
    ('Can you see the sky?', 'Are you unable to see the sky?', 'can_to_unable', MODAL_UNABLE),
    ('Can the dog on the left jump?', 'Is the dog on the left unable to jump?', 'can_to_unable', MODAL_UNABLE),
    ('Could the dog jump?', 'Is it false that the dog could jump?', 'is_it_false/aux', MODAL_SCOPE),
    ('Can this animal be a cat?', 'Is it false that this animal can be a cat?', 'is_it_false/aux', MODAL_SCOPE),
    ('Could the dog be sleeping?', 'Is it false that the dog could be sleeping?', 'is_it_false/aux', MODAL_SCOPE),
    ('Will the glass break?', 'Will the glass not break?', 'not/aux', ""),
    ('Has the man taken off his hat?', 'Has the man not taken off his hat?', 'not/aux', ""),
    ('Is it false that the car is red?', 'Is the car red?', 'undo_is_it_false', ""),
    ('Is it true that the car is red?', 'Is it false that the car is red?', 'true_to_false', ""),
    ('In the image, is there a dog?', 'In the image, is there no dog?', 'a_to_no', ""),
    ('Is there a dog in the image? Answer yes or no.', 'Is there no dog in the image? Answer yes or no.', 'a_to_no', ""),
    ('Is there a café in the image?', 'Is there no café in the image?', 'a_to_no', ""),
    ("Is the text '東京' written on the sign?", "Is the text '東京' not written on the sign?", 'not/be', ""),
    ('Is the text “OPEN NOW” written on the sign?', 'Is the text “OPEN NOW” not written on the sign?', 'not/be', ""),
    ('Are the butterfly’s wings open?', 'Are the butterfly’s wings not open?', 'not/be', ""),
    ('Is the lamp on the desk turned on?', 'Is the lamp on the desk not turned on?', 'not/be', ""),
    ('Is the car in the street parked?', 'Is the car in the street not parked?', 'not/be', ""),
    ('Is the logo on the cap a star?', 'Is the logo on the cap not a star?', 'not/be', ""),
    ("In the picture, is one of the car's doors open?", "In the picture, is it false that one of the car's doors is open?", 'is_it_false/be', QUANTIFIED_SUBJECT),
    ('Are some of the cars parked?', 'Is it false that some of the cars are parked?', 'is_it_false/be', QUANTIFIED_SUBJECT),
    ('Is the sign on the building written in English?', 'Is the sign on the building not written in English?', 'not/be', ""),
    ('Is the person in the photo a woman?', 'Is the person in the photo not a woman?', 'not/be', ""),
    ('Is the glass on the table half full?', 'Is the glass on the table not half full?', 'not/be', ""),
    ('Is the man on the right a doctor?', 'Is the man on the right not a doctor?', 'not/be', ""),
    ('Is the cup to the left of the laptop?', 'Is the cup not to the left of the laptop?', 'not/be', ""),
    ('Is the cup next to a plate?', 'Is the cup not next to a plate?', 'not/be', ""),
    ('Is the man in the middle of a crowd?', 'Is the man not in the middle of a crowd?', 'not/be', ""),
    ('Is the cat on the painted chair?', 'Is the cat not on the painted chair?', 'not/be', ""),
    ('Is the cyclist behind the yellow delivery truck called Maria Lopez?', 'Is the cyclist behind the yellow delivery truck not called Maria Lopez?', 'not/be', ""),
    ('Is the painting above the fireplace Mona Lisa?', 'Is the painting above the fireplace not Mona Lisa?', 'not/be', ""),
    ("Is the sign near the door 'EXIT'?", "Is the sign near the door not 'EXIT'?", 'not/be', ""),
    ('Is the price on the tag 4.99?', 'Is the price on the tag not 4.99?', 'not/be', ""),
    ('Is the sum of the numbers on the board equal to 30?', 'Is the sum of the numbers on the board not equal to 30?', 'not/be', ""),
    ('Is the kettle on the stove mostly empty?', 'Is the kettle on the stove not mostly empty?', 'not/be', ""),
    ('Is the dog in the yard not barking?', 'Is the dog in the yard barking?', 'drop_not', ""),
    ('Is the van primarily white in color?', 'Is the van not primarily white in color?', 'not/be', ""),
    ('I am hungry. Is the dish on the table a good choice?', 'I am hungry. Is the dish on the table not a good choice?', 'not/be', ""),
    ('Is the lamp on the desk Please answer yes or no.', 'Is the lamp not on the desk Please answer yes or no.', 'not/be', ""),
    ('Is the bowl under the shelf？ Please answer yes or no.', 'Is the bowl not under the shelf？ Please answer yes or no.', 'not/be', ""),
    ('Could the robot in the photo lift the box?', 'Is it false that the robot in the photo could lift the box?', 'is_it_false/aux', MODAL_SCOPE),
    ('Is the vase in the photo suitable as a gift?', 'Is the vase in the photo not suitable as a gift?', 'not/be', ""),
    ('Is the result on the screen 12-4?', 'Is the result on the screen not 12-4?', 'not/be', ""),
    ("Is the statue behind the fountain the town's founder?", "Is the statue behind the fountain not the town's founder?", 'not/be', ""),
    ('Is the kettle on the stove next to the sink?', 'Is the kettle on the stove not next to the sink?', 'not/be', ""),
    ('Is the cat under the table in the image?', 'Is the cat not under the table in the image?', 'not/be', ""),
    ('Is the horse near the barn black and white?', 'Is the horse near the barn not black and white?', 'not/be', ""),
    ('Does the girl in the photo hold something in her hand?', 'Does the girl in the photo not hold something in her hand?', 'not/do', ""),
]

# MME's question shapes (eval_tool Your_Results lines) and other real-benchmark wordings, natural form.
NATURAL_TABLE += [
    ("Is this photo taken in a place of corridor? Please answer yes or no.",
     "Is this photo not taken in a place of corridor? Please answer yes or no.", "not/be", ""),
    ("Does this artwork exist in the form of painting? Please answer yes or no.",
     "Does this artwork not exist in the form of painting? Please answer yes or no.", "not/do", ""),
    ("Is this movie titled yes man (2008)? Please answer yes or no.",
     "Is this movie not titled yes man (2008)? Please answer yes or no.", "not/be", ""),
    ("Is this a photo of Highgate Cemetery? Please answer yes or no.",
     "Is this not a photo of Highgate Cemetery? Please answer yes or no.", "not/be", ""),
    ("Is the actor inside the red bounding box named Bruce Campbell? Please answer yes or no.",
     "Is the actor inside the red bounding box not named Bruce Campbell? Please answer yes or no.", "not/be", ""),
    ("The image shows a python code. Will the number 3 appear in the output of the code? Please answer yes or no.",
     "The image shows a python code. Will the number 3 not appear in the output of the code? Please answer yes or no.",
     "not/aux", ""),
    ("Is it appropriate to translate the Chinese in the image into English 'very happy' in the picture? Please answer yes or no.",
     "Is it not appropriate to translate the Chinese in the image into English 'very happy' in the picture? Please answer yes or no.",
     "not/be", ""),
    ("Is there a total of two dogs in the image? Please answer yes or no.",
     "Is there not a total of two dogs in the image? Please answer yes or no.", "not/there", ""),
    ("I want to go where there are a lot of people. Is the venue in the picture appropriate? Please answer yes or no.",
     "I want to go where there are a lot of people. Is the venue in the picture not appropriate? Please answer yes or no.",
     "not/be", ""),
    ("The three cats in the picture, the one without a beard, is the middle one? Please answer yes or no.",
     "The three cats in the picture, the one without a beard, is not the middle one? Please answer yes or no.", "not/be", ""),
    ("Is the cushion plush?", "Is the cushion not plush?", "not/be", ""),
    ("Is the sofa cushion plush?", "Is it false that the sofa cushion is plush?", "is_it_false/be", GUESSED_SPLIT),
    ("Are two of the dogs asleep?", "Is it false that two of the dogs are asleep?", "is_it_false/be", QUANTIFIED_SUBJECT),
    ("Isn't the dog asleep?", "Is the dog asleep?", "drop_n't", ""),
]

# The contracted form: the auxiliary takes "n't" (or keeps "not" where English has no contraction).
CONTRACTED_TABLE = [
    ("Is this photo taken in a place of corridor?", "Isn't this photo taken in a place of corridor?", "n't/be"),
    ("Are the butterfly's wings open?", "Aren't the butterfly's wings open?", "n't/be"),
    ("Does the man wear a hat?", "Doesn't the man wear a hat?", "n't/do"),
    ("Did the man wear a hat?", "Didn't the man wear a hat?", "n't/do"),
    ("Can you see the sky?", "Are you unable to see the sky?", "can_to_unable", MODAL_UNABLE),
    ("Would the glass break?", "Wouldn't the glass break?", "n't/aux"),
    ("Will the number 3 appear in the output?", "Won't the number 3 appear in the output?", "n't/aux"),
    ("Has the man taken off his hat?", "Hasn't the man taken off his hat?", "n't/aux"),
    ("Are there two dogs in the image?", "Aren't there exactly two dogs in the image?", "n't_exactly/there", COUNT_WORDING),
    ("Am I eating a strawberry?", "Am I not eating a strawberry?", "not/be"),
    ("May I have two apples?", "Is it false that I may have two apples?", "is_it_false/aux", MODAL_SCOPE),
    ("Is there a dog in the image?", "Is there no dog in the image?", "a_to_no"),
    ("Isn't the dog asleep?", "Is the dog asleep?", "drop_n't"),
    ("Is the dog not asleep?", "Is the dog asleep?", "drop_not"),
    ("IS THE CAR RED?", "ISN'T THE CAR RED?", "n't/be"),
]


def test_table_is_large_enough_and_covers_every_rule_shape():
    assert len(TABLE) >= 40
    assert {rule for _, _, rule in TABLE} >= {"a_to_no", "an_to_no", "any_to_no", "is_it_false/be", "is_it_false/do",
                                            "is_it_false/aux", "is_it_false/there", "undo_is_it_false"}


@pytest.mark.parametrize("question,expected,rule", TABLE, ids=[q for q, _, _ in TABLE])
def test_rule_negation_table(question, expected, rule):
    result = FRAME.negate(question)
    assert result == NegationResult(expected, "rules:frame", rule)
    assert result.question != question


@pytest.mark.parametrize("question,expected,rule", TABLE, ids=[q for q, _, _ in TABLE])
def test_double_negation_gives_back_the_question(question, expected, rule):
    negated = FRAME.negate(question)
    assert FRAME.unnegate(negated.question, negated.rule) == question
    if rule != "true_to_false":  # "Is it true that S?" -> "Is it false that S?" -> "S?" without the rule hint
        assert FRAME.negate(negated.question).question == question


@pytest.mark.parametrize("question,expected,rule,note", NATURAL_TABLE, ids=[q for q, *_ in NATURAL_TABLE])
def test_natural_negation_table(question, expected, rule, note):
    assert NEG.negate(question) == NegationResult(expected, "rules", rule, note)
    # double negation: with the rule hint always; without it wherever the source itself was not negated
    negated = NEG.negate(question)
    assert NEG.unnegate(negated.question, negated.rule) == question
    if rule not in ("true_to_false", "drop_n't", "undo_is_it_false"):
        assert NEG.negate(negated.question).question == question


@pytest.mark.parametrize("question,expected,rule,note", [(*row, "")[:4] for row in CONTRACTED_TABLE],
                         ids=[q for q, *_ in CONTRACTED_TABLE])
def test_contracted_negation_table(question, expected, rule, note):
    result = CONTRACTED.negate(question)
    assert result == NegationResult(expected, "rules:contracted", rule, note)
    assert CONTRACTED.unnegate(result.question, result.rule) == question


@pytest.mark.parametrize("question,expected,rule", TABLE, ids=[q for q, _, _ in TABLE])
def test_natural_and_framed_forms_split_the_question_alike(question, expected, rule):
    """Where both forms rewrite a question, the natural one is the question with one "not" inserted right after the
    subject, and the framed clause is that subject followed by the auxiliary: the two agree on the split."""
    natural = NEG.negate(question)
    if not (rule.startswith("is_it_false/") and natural.rule.startswith("not/")):
        return
    words, source = natural.question.split(), question.split()
    at = words.index("not")
    assert words[:at] + words[at + 1:] == source
    aux = next(w for w in source if w.lower().rstrip(",") in ("is", "are", "was", "were", "does", "do", "did", "can",
                                                                "could", "has", "have", "had", "will", "would"))
    start = source.index(aux) + 1
    subject = source[start:at]
    clause = expected.split(" that ", 1)[1].split()
    assert clause[: len(subject)] == subject


def test_negation_forms_are_checked():
    with pytest.raises(ValueError, match="unknown negation form 'fancy'"):
        RuleNegator("fancy")
    assert [RuleNegator(f).name for f in ("not", "contracted", "frame")] == ["rules", "rules:contracted", "rules:frame"]


def _all_pope_questions() -> list[str]:
    return [rec["text"] for records in read_pope_questions().values() for rec in records]


def test_every_real_pope_question_uses_a_an_to_no_and_round_trips():
    questions = _all_pope_questions()
    assert len(questions) == 9000
    results = NEG.negate_batch(questions)
    coverage = Counter(r.rule for r in results)
    assert set(coverage) == {"a_to_no", "an_to_no"} and sum(coverage.values()) == 9000
    spelled_otherwise = Counter()
    for q, r in zip(questions, results):
        m = re.fullmatch(r"Is there (a|an) (.+) in the image\?", q)
        assert m, q
        assert r.question == f"Is there no {m[2]} in the image?"
        assert r.rule == f"{m[1]}_to_no"
        # with the stored rule the article comes back exactly, for all 9,000
        assert NEG.unnegate(r.question, r.rule) == q
        back = NEG.negate(r.question)
        if back.question != q:
            spelled_otherwise[q] += 1
        else:
            assert back.rule == f"no_to_{m[1]}"
    # re-deriving a/an from spelling only misses POPE's own typo "an traffic light"
    assert set(spelled_otherwise) <= {"Is there an traffic light in the image?"}
    assert rule_coverage(questions) == coverage


def test_rule_coverage_counts_unsupported_questions():
    counts = rule_coverage(["Is there a dog?", "Is the car red?", "What colour is the car?", ""])
    assert counts == Counter({"a_to_no": 1, "not/be": 1, "unsupported": 2})
    assert rule_coverage(["Is the car red?"], form="frame") == Counter({"is_it_false/be": 1})


@pytest.mark.parametrize(
    "bad,message",
    [
        ("", "empty question"),
        ("   ", "empty question"),
        ("The dog is brown.", "not a question"),
        ("dog", "not a question"),
        ("What color is the car?", "not a yes/no question"),
        ("Is?", "cannot negate"),
    ],
)
def test_bad_questions_raise_data_error_naming_the_field(bad, message):
    with pytest.raises(DataError, match=message) as info:
        NEG.negate(bad)
    assert info.value.field == "question"


def test_bad_question_in_a_batch_names_its_position_and_non_strings_fail():
    with pytest.raises(DataError, match=r"row 2: field 'question'") as info:
        NEG.negate_batch(["Is the car red?", "Is there a cat?", "Where is the cat?"])
    assert info.value.row == 2
    with pytest.raises(DataError, match="must be a string"):
        NEG.negate(None)  # type: ignore[arg-type]


def test_question_without_question_mark_but_with_auxiliary_is_accepted():
    assert NEG.negate("Is the car red").question == "Is the car not red?"
    assert FRAME.negate("Is the car red").question == "Is it false that the car is red?"


def test_unnegate_rejects_a_rule_that_does_not_fit():
    with pytest.raises(DataError, match="not an 'Is there no"):
        NEG.unnegate("Is the car red?", "a_to_no")


def test_rule_negator_is_a_picklable_negator():
    assert isinstance(NEG, Negator)
    clone = pickle.loads(pickle.dumps(NEG))
    assert clone.negate_batch(["Is there a dog?"]) == NEG.negate_batch(["Is there a dog?"])


# -- datasets --------------------------------------------------------------------------------------
def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (i * 20 % 256, 50, 200 - i)).save(buf, format="PNG")
    return buf.getvalue()


QUESTIONS = [
    ("Is there a dog in the image?", "yes"),
    ("Is there an umbrella in the image?", "no"),
    ("Is the car red?", "yes"),
    ("Does the man wear a hat?", "no"),
    ("Are there two cats in the image?", "yes"),
    ("Can you see the sky?", "no"),
    ("Is the dog facing left?", "yes"),
]


def _source_ds(questions=QUESTIONS, negated: bool = False) -> datasets.Dataset:
    rows = [
        make_case(
            source="custom", subset="test", source_id=i, image={"bytes": _png(i), "path": None},
            image_id=f"custom:img{i % 4}", question=q, answer=a, negated=negated,
            provenance={"file": "q.json", "line": i + 1},
        )
        for i, (q, a) in enumerate(questions)
    ]
    return datasets.Dataset.from_list(rows, features=FEATURES)


def _plain_rows(ds: datasets.Dataset) -> list[dict]:
    return ds.cast_column("image", datasets.Image(decode=False)).to_list()


def test_negate_dataset_builds_valid_pairs():
    src = _source_ds()
    pairs = negate_dataset(src, RuleNegator(), batch_size=3)
    assert len(pairs) == 2 * len(src)
    assert pairs.features == src.features
    validate_dataset(pairs)
    rows = _plain_rows(pairs)
    originals = _plain_rows(src)
    assert len({r["id"] for r in rows}) == len(rows)
    for k, orig in enumerate(originals):
        first, twin = rows[2 * k], rows[2 * k + 1]
        assert first == orig  # the original row is unchanged, and comes first
        assert twin["negated"] is True and orig["negated"] is False
        assert twin["answer"] != orig["answer"] and {twin["answer"], orig["answer"]} == {"yes", "no"}
        assert twin["id"] == orig["id"] + "+neg" and twin["pair_id"] == orig["pair_id"] == pair_id_of(twin["id"])
        assert twin["question"] != orig["question"]
        assert twin["question"] == NEG.negate(orig["question"]).question
        for key in ("image", "image_id", "source", "subset", "source_id", "transform", "transform_params", "target_model"):
            assert twin[key] == orig[key], key
        prov = loads(twin["provenance"])
        result = NEG.negate(orig["question"])
        note = {"negation_note": result.note} if result.note else {}
        assert prov == {**loads(orig["provenance"]), "negator": "rules",
                        "negation_rule": result.rule, "original_question": orig["question"], **note}


def test_negate_dataset_keeps_image_bytes_and_decodes_back():
    src = _source_ds()
    pairs = negate_dataset(src, RuleNegator())
    raw = [r["image"]["bytes"] for r in _plain_rows(pairs)]
    assert raw == [_png(i) for i in range(len(src)) for _ in range(2)]
    assert isinstance(pairs[1]["image"], Image.Image) and pairs[1]["image"].size == (8, 6)


def test_negate_dataset_num_proc_2_equals_single_process():
    src = _source_ds(QUESTIONS * 3)
    one = negate_dataset(src, RuleNegator(), batch_size=4)
    two = negate_dataset(src, RuleNegator(), batch_size=4, num_proc=2)
    assert _plain_rows(one) == _plain_rows(two)
    assert _plain_rows(one) == _plain_rows(negate_dataset(src, RuleNegator(), batch_size=4))  # deterministic


def test_negate_dataset_rejects_negated_rows_and_bad_questions():
    with pytest.raises(DataError, match=r"row 0: field 'negated': row is already negated"):
        negate_dataset(_source_ds(negated=True), RuleNegator())
    bad = list(QUESTIONS)
    bad[4] = ("What colour is the car?", "yes")
    with pytest.raises(DataError, match=r"row 4 \(\S+/4\): field 'question': not a yes/no question"):
        negate_dataset(_source_ds(bad), RuleNegator(), batch_size=3)
    with pytest.raises(DataError, match="lacks column"):
        negate_dataset(_source_ds().remove_columns("pair_id"), RuleNegator())


# -- review export ---------------------------------------------------------------------------------
def test_review_export_csv_and_html(tmp_path: Path):
    tricky = 'Is the sign\'s text "<b>SALE & GO</b>" visible?'
    src = _source_ds([*QUESTIONS, (tricky, "yes")])
    pairs = negate_dataset(src, RuleNegator())
    csv_path, html_path = review_export(pairs, tmp_path / "review", n=5, seed=1)
    with csv_path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames) == REVIEW_COLUMNS
        rows = list(reader)
    assert len(rows) == 5 and len({r["id"] for r in rows}) == 5
    by_id = {r["id"]: r for r in _plain_rows(pairs)}
    for r in rows:
        orig, twin = by_id[r["id"]], by_id[r["id"] + "+neg"]
        assert (r["original_question"], r["negated_question"]) == (orig["question"], twin["question"])
        assert (r["original_answer"], r["negated_answer"]) == (orig["answer"], twin["answer"])
        assert r["negator"] == "rules" and r["rule"] == loads(twin["provenance"])["negation_rule"]
        assert r["correct?"] == ""
    text = html_path.read_text(encoding="utf-8")
    assert text.count('<tr class="pair">') == 5
    assert text.count("data:image/jpeg;base64,") == 5
    # the page fits its window: a fixed layout whose column widths add up to the table's, text wrapping anywhere;
    # the pair is named once (the CSV keeps id and pair_id)
    import re

    headers = re.findall(r"<th class='(\w+)'>([^<]+)</th>", text)
    assert [h for _, h in headers] == ["image", "pair", "question", "negated question", "answer", "negated answer",
                                       "negator", "rule", "flag", "correct?"]
    widths = dict(re.findall(r"\.(\w+)\{width:(\d+)%\}", text))
    assert sum(int(widths[cls]) for cls, _ in headers) == 100
    assert "table-layout:fixed" in text and "overflow-wrap:anywhere" in text
    # same seed, same sample; all pairs when n is larger than the dataset
    assert review_export(pairs, tmp_path / "again", n=5, seed=1)[0].read_text() == csv_path.read_text()
    csv_all, html_all = review_export(pairs, tmp_path / "all", n=100)
    assert len(list(csv.DictReader(csv_all.open(encoding="utf-8")))) == len(src)
    page = html_all.read_text(encoding="utf-8")
    assert page.count('<tr class="pair">') == len(src)
    assert "<b>SALE" not in page
    assert "&lt;b&gt;SALE &amp; GO&lt;/b&gt;" in page and "&quot;" in page


def test_review_export_needs_pairs(tmp_path: Path):
    with pytest.raises(DataError, match="no complete"):
        review_export(_source_ds(), tmp_path)


def test_review_thumbnails_are_small_jpegs(tmp_path: Path):
    rows = [make_case(source="custom", subset="t", source_id=0, image=Image.new("RGB", (800, 600), (10, 200, 30)),
                      image_id="custom:big", question="Is there a dog?", answer="no")]
    pairs = negate_dataset(datasets.Dataset.from_list(rows, features=FEATURES), RuleNegator())
    _, html_path = review_export(pairs, tmp_path, n=1)
    uri = re.search(r'src="data:image/jpeg;base64,([^"]+)"', html_path.read_text()).group(1)
    with Image.open(io.BytesIO(base64.b64decode(uri))) as im:
        assert im.format == "JPEG" and max(im.size) <= 160



def _flag_ds() -> datasets.Dataset:
    questions = [("Is there a cat?", "yes", {}), ("Is the sofa cushion plush?", "no", {}),
                 ('Is "Blue" the correct answer to "What colour is the car?"?', "yes", {"rule": "answer_check"}),
                 ("Is the dog black?", "no", {}), ("Are the lights on?", "yes", {})]
    rows = [
        make_case(source="custom", subset="colour" if i < 3 else "state", source_id=i, image={"bytes": _png(i), "path": None},
                  image_id=f"custom:img{i}", question=q, answer=a, provenance=extra)
        for i, (q, a, extra) in enumerate(questions)
    ]
    return negate_dataset(datasets.Dataset.from_list(rows, features=FEATURES), RuleNegator())


def test_negation_summary_counts_rules_catch_all_and_guessed_splits():
    from vhx.negation import GUESSED_SPLIT, format_negation_summary, negation_summary

    rows = {r["subset"]: r for r in negation_summary(_flag_ds())}
    assert rows["colour"]["pairs"] == 3 and rows["state"]["pairs"] == 2 and rows["total"]["pairs"] == 5
    assert rows["colour"]["catch_all"] == 1 and rows["colour"]["flagged"] == 2  # the catch-all and "plush" (a guess)
    # only the guessed split is worded in the frame; the catch-all question reads 'Is "Blue" not the correct answer ...'
    assert rows["colour"]["rules"] == Counter({"a_to_no": 1, "is_it_false/be": 1, "not/be": 1})
    assert rows["colour"]["framed"] == 1 and rows["total"]["framed"] == 1
    text = format_negation_summary(list(rows.values()))
    assert re.search(r"^colour\s+3\s+1\s+1\s+2\s+", text, re.M) and "not/be 33%" in text
    assert text.splitlines()[-1].startswith("total")
    assert NEG.negate("Is the sofa cushion plush?").note == GUESSED_SPLIT
    assert NEG.negate("Is the cushion plush?").note == NEG.negate("Is the cushion soft?").note == ""


def test_review_lists_flagged_pairs_first(tmp_path: Path):
    csv_path, _ = review_export(_flag_ds(), tmp_path, n=3, seed=1)
    with csv_path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["flag"] for r in rows[:2]] == [GUESSED_SPLIT, "catch-all question"]
    assert rows[2]["flag"] == "" and len(rows) == 3
