"""The client side: the HDI client layer the OH_NN* front end sits on."""
