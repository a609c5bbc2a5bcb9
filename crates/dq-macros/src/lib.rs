use proc_macro::TokenStream;
#[proc_macro_attribute]
pub fn dequant_kernel(_a: TokenStream, i: TokenStream) -> TokenStream {
    i
}
