"""Export stripped (or unpruned) models to CTranslate2.

* :mod:`.layout`: which head count each CTranslate2 stack gets and what padding costs
  (pure functions over head counts);
* :mod:`.padding`: zero-padding of one attention's projections (pure tensor functions);
* :mod:`.converter`: a subclass of CTranslate2's ``FairseqConverter`` that uses both;
* :mod:`.translate`: sentencepiece in, sentencepiece out translation with the exported model.
"""
